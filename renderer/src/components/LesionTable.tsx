/**
 * A report's findings as lesions (one row per lesion, however many slices it spans), with sizes
 * in mm and slices as the server measured and grouped them (server/findings/).
 */
import type { Report } from '../api/types.ts';
import { labelText, percent } from '../format.ts';
import { lesionSizeText, slicesText } from '../lesion-text.ts';

export function LesionTable(props: { report: Report }) {
  const places = new Map(props.report.findings.map((f) => [f.id, f.place]));
  const byId = new Map(props.report.findings.map((f) => [f.id, f]));
  const members = (ids: readonly string[]) => ids.flatMap((id) => byId.get(id) ?? []);
  return (
    <table className="grid" data-testid="report-lesions">
      <tbody>
        {props.report.lesions.map((lesion) => (
          <tr key={lesion.id} data-testid="report-lesion">
            <td>{labelText(lesion.label)}</td>
            <td>{members(lesion.finding_ids).every((f) => f.source === 'reader') ? 'drawn by reader' : percent(lesion.confidence)}</td>
            <td>{lesionSizeText(lesion, places)}</td>
            <td>
              {slicesText(lesion.first_slice, lesion.last_slice, lesion.slices)}
              {lesion.finding_ids.length > 1 ? <span className="muted"> ({lesion.finding_ids.length} findings, one lesion)</span> : null}
            </td>
            <td data-testid="report-lesion-review">
              {lesion.review ?? 'not reviewed'}
              {members(lesion.finding_ids).flatMap((f) => (f.review === 'rejected' && f.review_reason ? [f.review_reason] : [])).map((reason) => (
                <span key={reason} className="muted">
                  : {reason}
                </span>
              ))}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
