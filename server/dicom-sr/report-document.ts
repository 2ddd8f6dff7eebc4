/**
 * A signed report as a Basic Text SR following TID 2000 (Basic Diagnostic Imaging Report): the
 * author as person observer, a Findings section with one line per finding of the signed snapshot
 * (its verdict as signed) inferred from its image, and a reference to the AI result SR the
 * findings came from; Impressions and Recommendations as written; then each addendum as its own
 * Addendum section with its author, time, text and the verdicts it changed. Addenda are in the same
 * document rather than separate SRs: a reader of any one instance sees the whole signed record,
 * and each addendum makes a new instance (its content, hence its UID, changed) that a PACS files
 * beside the earlier one in the same series.
 */
import { CODES } from '#server/dicom-sr/codes.ts';
import { child, type Child, type ContentItem, type SopReference } from '#server/dicom-sr/content-items.ts';
import { language, personObserver, type Person } from '#server/dicom-sr/measurement-report.ts';

export type SignedFinding = { line: string; image: SopReference | null };

export type SignedAddendum = { author: Person; at: string; text: string; changes: readonly string[] };

export type SignedReport = {
  author: Person;
  findings: readonly SignedFinding[];
  aiResult: SopReference | null;
  impression: string;
  recommendation: string;
  addenda: readonly SignedAddendum[];
};

const text = (name: ContentItem['name'], value: string, children?: Child[]): ContentItem => ({ type: 'TEXT', name, text: value, ...(children ? { children } : {}) });

const section = (name: ContentItem['name'], children: Child[], observedAt?: string): Child =>
  child('CONTAINS', { type: 'CONTAINER', name, children, ...(observedAt ? { observedAt } : {}) });

export function reportTree(report: SignedReport): ContentItem {
  const findings: Child[] = report.findings.map((f) =>
    child('CONTAINS', text(CODES.finding, f.line, f.image ? [child('INFERRED FROM', { type: 'IMAGE', name: CODES.source, ref: f.image })] : undefined)),
  );
  if (findings.length === 0) findings.push(child('CONTAINS', text(CODES.finding, 'No findings.')));
  if (report.aiResult) findings.push(child('CONTAINS', { type: 'COMPOSITE', name: CODES.source, ref: report.aiResult }));
  return {
    type: 'CONTAINER',
    name: CODES.diagnosticImagingReport,
    template: '2000',
    children: [
      language(),
      ...personObserver(report.author),
      section(CODES.findingsHeading, findings),
      ...(report.impression.trim() === '' ? [] : [section(CODES.impressionsHeading, [child('CONTAINS', text(CODES.impression, report.impression))])]),
      ...(report.recommendation.trim() === '' ? [] : [section(CODES.recommendationsHeading, [child('CONTAINS', text(CODES.recommendation, report.recommendation))])]),
      ...report.addenda.map((a) =>
        section(
          CODES.addendumHeading,
          [
            ...personObserver(a.author),
            child('CONTAINS', text(CODES.impression, a.text)),
            ...a.changes.map((line) => child('CONTAINS', text(CODES.finding, line))),
          ],
          a.at,
        ),
      ),
    ],
  };
}
