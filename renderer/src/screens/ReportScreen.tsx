export function ReportScreen({ scanId }: { scanId: string }) {
  return <section>{scanId}</section>;
}
