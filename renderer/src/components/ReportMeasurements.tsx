/**
 * The report's measurements (issue 11, reading tools): the author's lengths, ROIs and probes on
 * the scan as the server lists them with the report (a final report: those made until signing).
 */
import type { Report } from '../api/types.ts';
import { describeMeasurement } from '../imaging/measure.ts';

const KIND_NAMES = { length: 'Length', ellipse: 'Ellipse ROI', rectangle: 'Rectangle ROI', probe: 'Pixel value' } as const;

export function ReportMeasurements({ report }: { report: Report }) {
  return (
    <div data-testid="report-measurements">
      <h3>Measurements ({report.measurements.length})</h3>
      {report.measurements.length === 0 ? (
        <p className="muted">None. Draw them in the viewer (Length, Ellipse, Rect, Probe); they are listed here and in the downloads.</p>
      ) : (
        <table>
          <tbody>
            {report.measurements.map((m) => (
              <tr key={m.id} data-testid="report-measurement" data-kind={m.kind}>
                <td>{KIND_NAMES[m.kind]}</td>
                <td>{describeMeasurement(m)}</td>
                <td className="muted" title={m.instance_uid}>
                  frame {m.frame + 1}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
