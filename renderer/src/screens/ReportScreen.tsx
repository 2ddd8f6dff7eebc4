/**
 * The report for one scan: drafted from the AI result, impression and recommendation edited,
 * finalized (then read-only), downloaded as JSON, CSV or XML - this report only. A draft with
 * an empty impression starts with the findings accepted in the viewer (report-text.ts), marked
 * as a suggestion to edit. The recommendation says what it was built from (the model's
 * suggestion, the reader's verdicts, the reader's words). A final report takes addenda: signed,
 * dated sections, which may also change finding verdicts (the viewer sends readers here).
 */
import { useEffect, useMemo, useRef, useState } from 'react';
import { ApiError, type Client } from '../api/client.ts';
import type { FindingReview } from '../../../common/vocabulary.ts';
import type { Addendum, Finding, Instance, Label, Page, Report, Scan, ScanResult } from '../api/types.ts';
import { ModelTag } from '../components/ClinicalBanner.tsx';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime, labelText, percent, saveBlob } from '../format.ts';
import { stackOf } from '../imaging/stack.ts';
import { navigate } from '../route.ts';
import { onlyReportCsv, onlyReportXml } from '../report-download.ts';
import { impressionFromFindings, impressionFromLesions, type FindingPlace } from '../report-text.ts';
import { LesionTable } from '../components/LesionTable.tsx';
import { ReportMeasurements } from '../components/ReportMeasurements.tsx';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';

type Loaded = { scan: Scan; report: Report | null };

/** What the suggested impression is made of; each part may be missing without harm. */
type Context = { result: ScanResult | null; instances: Instance[]; labels: Label[] };

async function orEmpty<T>(promise: Promise<T>, empty: T): Promise<T> {
  try {
    return await promise;
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    return empty;
  }
}

function loadContext(client: Client, scanId: string, signal: AbortSignal): Promise<Context> {
  const path = `/v1/scans/${encodeURIComponent(scanId)}`;
  return Promise.all([
    orEmpty(client.get<ScanResult>(`${path}/results`, { signal }), null),
    orEmpty(client.all<Instance>(`${path}/instances`, { signal }), []),
    orEmpty(client.get<Page<Label>>('/v1/labels', { signal }).then((page) => page.items), []),
  ]).then(([result, instances, labels]) => ({ result, instances, labels }));
}

/** The impression suggested for `report`: its snapshot's findings with the reviews as they are now. */
function suggestImpression(report: Report, context: Context): string | null {
  const current = new Map((context.result?.findings ?? []).map((f) => [f.id, f.review]));
  const findings: Finding[] = report.findings.map((f) => ({ ...f, review: current.has(f.id) ? (current.get(f.id) ?? null) : f.review }));
  // The viewer's slice numbers: its stack (instances in series order, frames by their own positions).
  const slices = stackOf(context.instances).map((slice) => `${slice.instance.instance_uid}#${slice.frame}`);
  const names = new Map(context.labels.map((l) => [l.label, l.display_name]));
  // A snapshot whose findings carry places gives the server's lesions, in mm; older ones slices only.
  if (report.findings.length > 0 && report.findings.every((f) => f.place !== undefined)) {
    return impressionFromLesions(report.lesions, report.findings, {
      displayName: (label) => names.get(label) ?? labelText(label),
      model: report.analysis ? `${report.analysis.model_name} v${report.analysis.model_version}` : null,
    });
  }
  return impressionFromFindings(findings, {
    displayName: (label) => names.get(label) ?? labelText(label),
    place: (finding): FindingPlace => {
      const at = slices.indexOf(`${finding.instance_uid}#${finding.frame}`);
      return at >= 0 ? { slice: at + 1, slices: slices.length } : null;
    },
    model: report.analysis ? `${report.analysis.model_name} v${report.analysis.model_version}` : null,
  });
}

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
  const context = useLoad((signal) => loadContext(client, scanId, signal), [client, scanId]);
  const [impression, setImpression] = useState('');
  const [recommendation, setRecommendation] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);

  const report = loaded.state === 'ready' ? loaded.value.report : null;
  const contextValue = context.state === 'ready' ? context.value : null;
  const suggestion = useMemo(
    () => (report && report.status === 'draft' && report.impression.trim() === '' && contextValue ? suggestImpression(report, contextValue) : null),
    [report, contextValue],
  );
  // Offered once per report: an impression the reader emptied and saved stays empty.
  const suggestedFor = useRef<string | null>(null);
  useEffect(() => {
    if (!report) return;
    if (report.impression.trim() === '' && suggestion !== null && suggestedFor.current !== report.id) {
      suggestedFor.current = report.id;
      setImpression(suggestion);
    } else if (suggestedFor.current !== report.id || report.impression.trim() !== '') {
      setImpression(report.impression);
    }
    setRecommendation(report.recommendation);
  }, [report, suggestion]);

  if (loaded.state === 'loading') return <Loading what="report" />;
  if (loaded.state === 'error') return <ErrorState error={loaded.error} retry={loaded.reload} />;
  const { scan } = loaded.value;

  /** True when the work was done; a failure is shown, not thrown. */
  const run = async (work: () => Promise<Report>, message: string): Promise<boolean> => {
    setBusy(true);
    setError(null);
    try {
      const next = await work();
      loaded.set({ scan, report: next });
      setSaved(message);
      return true;
    } catch (caught) {
      setError(caught);
      return false;
    } finally {
      setBusy(false);
    }
  };

  const draft = () =>
    run(async () => {
      try {
        return await client.post<Report>('/v1/reports', { body: { scan_id: scan.scan_id } });
      } catch (caught) {
        // 409: another reader finalized this scan's report since the screen loaded. Its message
        // names that report; show it here, with the form to add an addendum to it.
        if (caught instanceof ApiError && caught.info.status === 409) {
          const reports = await client.get<Page<Report>>('/v1/reports', { query: { scan_id: scan.scan_id, limit: 500 } });
          const final = reports.items.findLast((r) => r.status === 'final');
          if (final) loaded.set({ scan, report: final });
        }
        throw caught;
      }
    }, 'Draft created from the AI result.');
  const save = (current: Report) =>
    run(() => client.patch<Report>(`/v1/reports/${current.id}`, { body: { impression, recommendation } }), `Saved at ${new Date().toLocaleTimeString()}.`);
  const finalize = (current: Report) =>
    run(async () => {
      // Save the edits and finalize in one request, so what is signed is what is on screen.
      return client.patch<Report>(`/v1/reports/${current.id}`, { body: { impression, recommendation, status: 'final' } });
    }, 'Report finalized. It can no longer be changed.');

  const addAddendum = (current: Report, text: string, findings: Array<{ id: string; review: FindingReview | null }>) =>
    run(
      () => client.post<Report>(`/v1/reports/${encodeURIComponent(current.id)}/addenda`, { body: findings.length === 0 ? { text } : { text, findings } }),
      'Addendum added and signed.',
    ).then((done) => {
      // The findings' current verdicts, which the addendum may have changed.
      if (done) context.reload();
      return done;
    });

  const download = async (current: Report, format: 'json' | 'csv' | 'xml') => {
    setError(null);
    try {
      if (format === 'json') {
        const fresh = await client.get<Report>(`/v1/reports/${encodeURIComponent(current.id)}`);
        saveBlob(new Blob([JSON.stringify(fresh, null, 2)], { type: 'application/json' }), `report-${current.id}.json`);
        return;
      }
      // CSV and XML exist on the list only; it holds every report of the scan, this one is kept.
      const { blob, headers } = await client.binary('/v1/reports', { query: { scan_id: scan.scan_id, format, limit: 500 }, accept: format === 'csv' ? 'text/csv' : 'application/xml' });
      const whole = await blob.text();
      const one = format === 'csv' ? onlyReportCsv(whole, current.id) : onlyReportXml(whole, current.id);
      if (one === null) throw new Error(`Report ${current.id} is missing from the server's ${format.toUpperCase()} list for this scan; reload and try again.`);
      saveBlob(new Blob([one], { type: headers.get('Content-Type') ?? (format === 'csv' ? 'text/csv; charset=utf-8' : 'application/xml') }), `report-${current.id}.${format}`);
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
          suggested={suggestion !== null && report.impression.trim() === '' && impression === suggestion}
          busy={busy}
          onSave={() => void save(report)}
          onFinalize={() => {
            if (window.confirm('Finalize this report? A final report cannot be changed.')) void finalize(report);
          }}
          onDownload={(format) => void download(report, format)}
        />
      )}
      {report && report.status === 'final' ? (
        <Addenda
          report={report}
          current={contextValue?.result ?? null}
          canWrite={canWrite}
          busy={busy}
          onAdd={(text, findings) => addAddendum(report, text, findings)}
        />
      ) : null}
      {saved ? <p className="muted" data-testid="report-saved">{saved}</p> : null}
      <InlineError error={error} />
      {error instanceof ApiError && error.info.status === 409 ? (
        <p className="muted" data-testid="report-conflict-hint">
          {report?.status === 'final' && canWrite ? 'The report shown is final: add an addendum to it above.' : 'Reload to see the report as it is now.'}
        </p>
      ) : null}
    </section>
  );
}

const BASIS_NOTES: Record<Report['recommendation_basis'], string> = {
  model: "The AI model's suggestion: no finding reviewed yet. It follows your verdicts once you accept or reject findings.",
  verdicts: 'From the findings accepted on review, each with its rule for this modality; rejected findings are left out.',
  reader: "Written by the reader; verdicts no longer change it.",
};

const VERDICT_TEXT = (review: FindingReview | null): string => review ?? 'not reviewed';

/** The signed addenda of a final report, and a form to add one (text, optional verdict changes). */
function Addenda(props: {
  report: Report;
  /** The scan's result now, for the findings' current verdicts (addenda may have changed them). */
  current: ScanResult | null;
  canWrite: boolean;
  busy: boolean;
  onAdd(text: string, findings: Array<{ id: string; review: FindingReview | null }>): Promise<boolean>;
}) {
  const { report } = props;
  const [text, setText] = useState('');
  const [changes, setChanges] = useState<Record<string, FindingReview | 'clear'>>({});
  const now = new Map((props.current?.findings ?? []).map((f) => [f.id, f.review]));
  const verdictNow = (finding: Finding): FindingReview | null => (now.has(finding.id) ? (now.get(finding.id) ?? null) : finding.review);
  const submit = async () => {
    const findings = Object.entries(changes).map(([id, to]) => ({ id, review: to === 'clear' ? null : to }));
    if (!(await props.onAdd(text.trim(), findings))) return;
    setText('');
    setChanges({});
  };
  return (
    <div className="panel addenda" data-testid="addenda">
      {report.conflicts.length > 0 ? (
        <div className="conflicts" data-testid="report-conflicts">
          <h3>Edits that arrived after signing ({report.conflicts.length})</h3>
          <p className="muted">Written on another workstation while this report was being signed; not part of the signed text. If one should stand, make it an addendum.</p>
          {report.conflicts.map((c) => (
            <div className="conflict" key={`${c.field}:${c.written_at}:${c.value.length}`} data-testid="report-conflict">
              <div className="report-meta">
                <b>{c.field === 'impression' ? 'Impression' : 'Recommendation'}</b>
                <span>{c.user_email ?? c.user_id ?? 'unknown reader'}</span>
                <span>{dateTime(c.written_at)}</span>
              </div>
              <p className="addendum-text">{c.value}</p>
              {props.canWrite ? (
                <button type="button" onClick={() => setText(`${c.field === 'impression' ? 'Impression' : 'Recommendation'} (edit made while the report was being signed):\n${c.value}`)} data-testid="conflict-to-addendum">
                  Use as addendum text
                </button>
              ) : null}
            </div>
          ))}
        </div>
      ) : null}
      <h3>Addenda ({report.addenda.length})</h3>
      {report.addenda.length === 0 ? <p className="muted">None. The signed report above is unchanged; later findings or changed verdicts go here.</p> : null}
      {report.addenda.map((addendum: Addendum, i) => (
        <div className="addendum" key={addendum.id} data-testid="addendum">
          <div className="report-meta">
            <b>Addendum {i + 1}</b>
            <span data-testid="addendum-author">{addendum.author.email}</span>
            <span data-testid="addendum-time">{dateTime(addendum.created_at)}</span>
          </div>
          <p className="addendum-text" data-testid="addendum-text">
            {addendum.text}
          </p>
          {addendum.finding_changes.map((c) => (
            <p className="muted" key={c.finding_id} data-testid="addendum-change">
              {labelText(c.label)}: {c.added ? 'added by the reader, accepted' : `${VERDICT_TEXT(c.from)} → ${VERDICT_TEXT(c.to)}`}
            </p>
          ))}
        </div>
      ))}
      {props.canWrite ? (
        <>
          <label>
            New addendum (signed with your name and the time; cannot be changed afterwards)
            <textarea value={text} onChange={(e) => setText(e.target.value)} rows={4} data-testid="addendum-input" />
          </label>
          {report.findings.length > 0 ? (
            <table className="grid">
              <tbody>
                {report.findings.map((f) => (
                  <tr key={f.id}>
                    <td>{labelText(f.label)}</td>
                    <td>{percent(f.confidence)}</td>
                    <td>now {VERDICT_TEXT(verdictNow(f))}</td>
                    <td>
                      <select
                        value={changes[f.id] ?? ''}
                        aria-label={`Verdict change for ${labelText(f.label)}`}
                        data-testid="addendum-verdict"
                        onChange={(e) => {
                          const value = e.target.value;
                          setChanges((all) => {
                            const next = { ...all };
                            if (value === 'accepted' || value === 'rejected' || value === 'clear') next[f.id] = value;
                            else delete next[f.id];
                            return next;
                          });
                        }}
                      >
                        <option value="">keep verdict</option>
                        <option value="accepted">change to accepted</option>
                        <option value="rejected">change to rejected</option>
                        <option value="clear">clear verdict</option>
                      </select>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          <div className="form-row">
            <button type="button" className="primary" disabled={props.busy || text.trim() === ''} onClick={() => void submit()} data-testid="add-addendum">
              Add addendum
            </button>
          </div>
        </>
      ) : null}
    </div>
  );
}

function ReportBody(props: {
  report: Report;
  impression: string;
  recommendation: string;
  setImpression(value: string): void;
  setRecommendation(value: string): void;
  editable: boolean;
  /** The impression on screen is the suggestion from accepted findings, not yet saved. */
  suggested: boolean;
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
          Final report — read-only. A later change (text or verdicts) is an addendum, below.
        </p>
      ) : null}
      <h3>{report.status === 'final' ? 'AI findings and verdicts as signed' : 'AI findings and your verdicts'}</h3>
      {report.findings.length === 0 ? <p className="muted">None.</p> : null}
      <LesionTable report={report} />
      <label>
        Impression
        {props.suggested && editable ? (
          <span className="suggested-note" data-testid="impression-suggested">
            Suggested from the findings you accepted, not saved yet: edit it, then save or finalize.
          </span>
        ) : null}
        <textarea
          value={props.impression}
          readOnly={!editable}
          onChange={(e) => props.setImpression(e.target.value)}
          className={props.suggested && editable ? 'suggested' : undefined}
          rows={Math.min(12, Math.max(4, props.impression.split('\n').length + 1))}
          data-testid="impression"
        />
      </label>
      <label>
        Recommendation
        <span className="suggested-note" data-testid="recommendation-basis" data-basis={report.recommendation_basis}>
          {BASIS_NOTES[report.recommendation_basis]}
        </span>
        <textarea value={props.recommendation} readOnly={!editable} onChange={(e) => props.setRecommendation(e.target.value)} data-testid="recommendation" />
      </label>
      <ReportMeasurements report={report} />
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
