/**
 * The report for one scan: drafted from the AI result, impression and recommendation edited,
 * finalized (then read-only), downloaded as JSON, CSV or XML.
 */
import { useEffect, useState } from 'react';
import { ApiError } from '../api/client.ts';
import type { Page, Report, Scan } from '../api/types.ts';
import { ModelTag } from '../components/ClinicalBanner.tsx';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime, labelText, percent, saveBlob } from '../format.ts';
import { navigate } from '../route.ts';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';

type Loaded = { scan: Scan; report: Report | null };

export function ReportScreen({ scanId }: { scanId: string }) {
  const { client, me } = useSession();
  const canWrite = hasScope(me, 'write:reports');
  const loaded = useLoad<Loaded>(
    async (signal) => {
      const [scan, reports] = await Promise.all([
        client.get<Scan>(`/v1/scans/${encodeURIComponent(scanId)}`, { signal }),
        client.get<Page<Report>>('/v1/reports', { signal, query: { scan_id: scanId, limit: 500 } }),
      ]);
      // The newest report of the scan is the one being worked on.
      const report = reports.items.at(-1) ?? null;
      return { scan, report };
    },
    [client, scanId],
  );
  const [impression, setImpression] = useState('');
  const [recommendation, setRecommendation] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);

  const report = loaded.state === 'ready' ? loaded.value.report : null;
  useEffect(() => {
    if (report) {
      setImpression(report.impression);
      setRecommendation(report.recommendation);
    }
  }, [report]);

  if (loaded.state === 'loading') return <Loading what="report" />;
  if (loaded.state === 'error') return <ErrorState error={loaded.error} retry={loaded.reload} />;
  const { scan } = loaded.value;

  const run = async (work: () => Promise<Report>, message: string) => {
    setBusy(true);
    setError(null);
    try {
      const next = await work();
      loaded.set({ scan, report: next });
      setSaved(message);
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };

  const draft = () => run(() => client.post<Report>('/v1/reports', { body: { scan_id: scan.scan_id } }), 'Draft created from the AI result.');
  const save = (current: Report) =>
    run(() => client.patch<Report>(`/v1/reports/${current.id}`, { body: { impression, recommendation } }), `Saved at ${new Date().toLocaleTimeString()}.`);
  const finalize = (current: Report) =>
    run(async () => {
      // Save the edits and finalize in one request, so what is signed is what is on screen.
      return client.patch<Report>(`/v1/reports/${current.id}`, { body: { impression, recommendation, status: 'final' } });
    }, 'Report finalized. It can no longer be changed.');

  const download = async (current: Report, format: 'json' | 'csv' | 'xml') => {
    setError(null);
    try {
      if (format === 'json') {
        const fresh = await client.get<Report>(`/v1/reports/${current.id}`);
        saveBlob(new Blob([JSON.stringify(fresh, null, 2)], { type: 'application/json' }), `report-${current.id}.json`);
      } else {
        const { blob } = await client.binary('/v1/reports', { query: { scan_id: scan.scan_id, format } });
        saveBlob(blob, `report-${current.id}.${format}`);
      }
    } catch (caught) {
      setError(caught);
    }
  };

  return (
    <section className="report" data-testid="report">
      <div className="toolbar">
        <button type="button" onClick={() => navigate({ name: 'viewer', scanId: scan.scan_id })}>
          ← Viewer
        </button>
        <h2>
          Report · {scan.patient_id} · {scan.modality} {scan.description ?? ''}
        </h2>
      </div>
      {!report ? (
        <Empty title="No report for this scan yet">
          {canWrite ? (
            <>
              A draft starts from the latest AI result (findings, recommendation, model).{' '}
              <button type="button" className="primary" onClick={() => void draft()} disabled={busy} data-testid="draft-report">
                Draft report from AI result
              </button>
            </>
          ) : (
            'Writing reports needs the write:reports scope; ask an admin.'
          )}
        </Empty>
      ) : (
        <ReportBody
          report={report}
          impression={impression}
          recommendation={recommendation}
          setImpression={setImpression}
          setRecommendation={setRecommendation}
          editable={canWrite && report.status === 'draft'}
          busy={busy}
          onSave={() => void save(report)}
          onFinalize={() => {
            if (window.confirm('Finalize this report? A final report cannot be changed.')) void finalize(report);
          }}
          onDownload={(format) => void download(report, format)}
        />
      )}
      {saved ? <p className="muted" data-testid="report-saved">{saved}</p> : null}
      <InlineError error={error} />
      {error instanceof ApiError && error.info.status === 409 ? <p className="muted">Reload to see the report as it is now.</p> : null}
    </section>
  );
}

function ReportBody(props: {
  report: Report;
  impression: string;
  recommendation: string;
  setImpression(value: string): void;
  setRecommendation(value: string): void;
  editable: boolean;
  busy: boolean;
  onSave(): void;
  onFinalize(): void;
  onDownload(format: 'json' | 'csv' | 'xml'): void;
}) {
  const { report, editable } = props;
  return (
    <div className="panel">
      <div className="report-meta">
        <span data-testid="report-status">Status: {report.status}</span>
        <span>Author: {report.author.email}</span>
        <span>Created {dateTime(report.created_at)}</span>
        {report.finalized_at ? <span>Finalized {dateTime(report.finalized_at)}</span> : null}
        {report.analysis ? <ModelTag name={report.analysis.model_name} version={report.analysis.model_version} /> : <span>No AI analysis</span>}
      </div>
      {report.status === 'final' ? (
        <p className="final-note" data-testid="report-final">
          Final report — read-only.
        </p>
      ) : null}
      <h3>AI findings at drafting</h3>
      {report.findings.length === 0 ? <p className="muted">None.</p> : null}
      <table className="grid">
        <tbody>
          {report.findings.map((f) => (
            <tr key={f.id}>
              <td>{labelText(f.label)}</td>
              <td>{percent(f.confidence)}</td>
              <td className="mono">
                x {Math.round(f.location.x)}, y {Math.round(f.location.y)}, {Math.round(f.location.width)}×{Math.round(f.location.height)}
              </td>
              <td>{f.review ?? 'not reviewed'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <label>
        Impression
        <textarea value={props.impression} readOnly={!editable} onChange={(e) => props.setImpression(e.target.value)} data-testid="impression" />
      </label>
      <label>
        Recommendation
        <textarea value={props.recommendation} readOnly={!editable} onChange={(e) => props.setRecommendation(e.target.value)} data-testid="recommendation" />
      </label>
      <div className="form-row">
        {editable ? (
          <>
            <button type="button" onClick={props.onSave} disabled={props.busy} data-testid="save-report">
              Save draft
            </button>
            <button type="button" className="primary" onClick={props.onFinalize} disabled={props.busy} data-testid="finalize-report">
              Finalize
            </button>
          </>
        ) : null}
        <span className="spacer" />
        <span className="muted">Download:</span>
        <button type="button" onClick={() => props.onDownload('json')} data-testid="download-json">
          JSON
        </button>
        <button type="button" onClick={() => props.onDownload('csv')} data-testid="download-csv">
          CSV
        </button>
        <button type="button" onClick={() => props.onDownload('xml')} data-testid="download-xml">
          XML
        </button>
      </div>
    </div>
  );
}
