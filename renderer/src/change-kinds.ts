/** What each kind of sync change is, as an admin reads it (docs/sync.md). */
export const CHANGE_KINDS: Readonly<Record<string, string>> = {
  instance: 'Image file',
  review: 'Verdict',
  report: 'Report',
  addendum: 'Addendum',
  finding: 'Reader finding',
  analysis: 'Analysis',
  scan: 'Scan',
};
