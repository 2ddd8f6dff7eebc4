/**
 * The worklist: every scan with patient, modality, date, status and the AI summary; filters,
 * sorting, thumbnails, and live progress while scans are queued or analysing and while any
 * import runs. Statuses move on the server as scans are read (in review, reviewed, reported), so
 * the list is loaded afresh whenever the worklist opens or the window regains focus.
 * Keys: ↑/↓ or j/k select, Enter opens, / focuses the patient filter, shift+A analyses the
 * selected scan (a plain `a` means accept in the viewer, so it does nothing here).
 */
import { useEffect, useMemo, useRef, useState } from 'react';
import { SCAN_STATUSES } from '../../../common/vocabulary.ts';
import type { Scan } from '../api/types.ts';
import { useAnalyses } from '../analyses.ts';
import { AnalyseButton, AnalysisStatus, useCanAnalyse, useRequestAnalysis } from '../components/AnalysisControls.tsx';
import { Empty, ErrorState, Loading } from '../components/StateMessage.tsx';
import { Thumbnail } from '../components/Thumbnail.tsx';
import { dicomDateKey } from '../dicom-date.ts';
import { dicomDate, labelText, percent } from '../format.ts';
import { navigate } from '../route.ts';
import { hasScope, useSession } from '../session.ts';
import { useImportActivity } from '../use-import-activity.ts';
import { useLoad } from '../use-load.ts';

type SortKey = 'patient' | 'modality' | 'date' | 'status' | 'ai';
type Sort = { key: SortKey; descending: boolean };

const BUSY_STATUSES = new Set(['queued', 'analyzing']);

function compare(a: Scan, b: Scan, key: SortKey): number {
  switch (key) {
    case 'patient':
      return a.patient_id.localeCompare(b.patient_id);
    case 'modality':
      return a.modality.localeCompare(b.modality);
    case 'date':
      // By the date read, not the text: "1997.04.24" sorts with 19970424 (issue 11).
      return dicomDateKey(a.study_date).localeCompare(dicomDateKey(b.study_date)) || a.created_at.localeCompare(b.created_at);
    case 'status':
      return SCAN_STATUSES.indexOf(a.status) - SCAN_STATUSES.indexOf(b.status);
    case 'ai':
      return (a.ai_summary?.confidence ?? -1) - (b.ai_summary?.confidence ?? -1);
  }
}

export function Worklist() {
  const { client, setScanOrder, me } = useSession();
  const scans = useLoad((signal) => client.all<Scan>('/v1/scans', { signal, max: 5000 }), [client]);
  const [patient, setPatient] = useState('');
  const [modality, setModality] = useState('');
  const [status, setStatus] = useState('');
  const [aiOnly, setAiOnly] = useState(false);
  const [sort, setSort] = useState<Sort>({ key: 'date', descending: true });
  const [selected, setSelected] = useState(0);
  const filterRef = useRef<HTMLInputElement>(null);
  const analyses = useAnalyses();
  const canAnalyse = useCanAnalyse();
  const requestAnalysis = useRequestAnalysis();

  const all = scans.state === 'ready' ? scans.value : [];
  const modalities = useMemo(() => [...new Set(all.map((s) => s.modality))].sort(), [all]);
  const rows = useMemo(() => {
    const needle = patient.trim().toLowerCase();
    const filtered = all.filter(
      (s) =>
        (!needle || s.patient_id.toLowerCase().includes(needle) || (s.description ?? '').toLowerCase().includes(needle)) &&
        (!modality || s.modality === modality) &&
        (!status || s.status === status) &&
        (!aiOnly || s.ai_summary !== null),
    );
    filtered.sort((a, b) => (sort.descending ? -1 : 1) * compare(a, b, sort.key) || a.scan_id.localeCompare(b.scan_id));
    return filtered;
  }, [all, patient, modality, status, aiOnly, sort]);

  useEffect(() => setScanOrder(rows.map((s) => s.scan_id)), [rows, setScanOrder]);

  // Live progress: while anything is queued or analysing, refresh the list every 2 s.
  const busy = all.some((s) => BUSY_STATUSES.has(s.status));
  const unanalysed = useMemo(() => all.filter((s) => s.status === 'received' && !analyses.runs.has(s.scan_id)), [all, analyses.runs]);
  const { reload } = scans;
  // A run started here ended: the list now has its status and AI summary.
  useEffect(() => {
    if (analyses.finished > 0) reload();
  }, [analyses.finished, reload]);

  useEffect(() => {
    if (!busy) return;
    const timer = setInterval(reload, 2000);
    return () => clearInterval(timer);
  }, [busy, reload]);

  // Imports started anywhere: new series appear as the job advances, whatever else is running.
  const importing = useImportActivity(client, reload);

  // Back from another window or tab (where a colleague may have reviewed or reported a scan).
  useEffect(() => {
    let last = Date.now();
    const onFocus = () => {
      if (Date.now() - last < 2000) return;
      last = Date.now();
      reload();
    };
    window.addEventListener('focus', onFocus);
    return () => window.removeEventListener('focus', onFocus);
  }, [reload]);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement) {
        if (event.key === 'Escape') (event.target as HTMLElement).blur();
        return;
      }
      if (event.key === 'ArrowDown' || event.key === 'j') setSelected((i) => Math.min(rows.length - 1, i + 1));
      else if (event.key === 'ArrowUp' || event.key === 'k') setSelected((i) => Math.max(0, i - 1));
      else if (event.key === 'Enter') {
        const scan = rows[selected];
        if (scan) navigate({ name: 'viewer', scanId: scan.scan_id });
      } else if (event.key === 'A' && event.shiftKey && canAnalyse) {
        const scan = rows[selected];
        if (scan) void requestAnalysis(scan);
      } else if (event.key === '/') {
        event.preventDefault();
        filterRef.current?.focus();
      } else return;
      event.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [rows, selected, canAnalyse, requestAnalysis]);

  const header = (key: SortKey, text: string) => (
    <th
      aria-sort={sort.key === key ? (sort.descending ? 'descending' : 'ascending') : 'none'}
      onClick={() => setSort((s) => ({ key, descending: s.key === key ? !s.descending : key === 'date' || key === 'ai' }))}
      className="sortable"
      data-testid={`sort-${key}`}
    >
      {text} {sort.key === key ? (sort.descending ? '▼' : '▲') : ''}
    </th>
  );

  return (
    <section className="worklist" data-testid="worklist">
      <div className="toolbar">
        <h2>Worklist</h2>
        <input
          ref={filterRef}
          placeholder="Patient or description  ( / )"
          value={patient}
          onChange={(e) => setPatient(e.target.value)}
          data-testid="filter-patient"
        />
        <select value={modality} onChange={(e) => setModality(e.target.value)} data-testid="filter-modality" aria-label="Modality">
          <option value="">All modalities</option>
          {modalities.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
        <select value={status} onChange={(e) => setStatus(e.target.value)} data-testid="filter-status" aria-label="Status">
          <option value="">All statuses</option>
          {SCAN_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.replace('_', ' ')}
            </option>
          ))}
        </select>
        <label className="check">
          <input type="checkbox" checked={aiOnly} onChange={(e) => setAiOnly(e.target.checked)} /> with AI findings
        </label>
        <span className="count" data-testid="worklist-count">
          {scans.state === 'ready' ? `${rows.length} of ${all.length} scans` : ''}
        </span>
        {canAnalyse && unanalysed.length > 0 ? (
          <button type="button" onClick={() => unanalysed.forEach((scan) => analyses.start(scan.scan_id))} data-testid="analyse-new" title="Queue every scan that has not been analysed yet">
            Analyse {unanalysed.length} not analysed
          </button>
        ) : null}
        {busy ? (
          <span className="live" data-testid="live-progress">
            ● analysing {all.filter((s) => BUSY_STATUSES.has(s.status)).length}
          </span>
        ) : null}
        {importing.length > 0 ? (
          <span className="live" data-testid="import-progress" title="Series appear here as they are imported">
            ● importing{' '}
            {importing
              .map((job) => `${job.counts.files_seen}${job.counts.files_total !== null ? ` of ${job.counts.files_total}` : ''} files (${job.counts.imported} imported)`)
              .join(', ')}
          </span>
        ) : null}
      </div>
      {scans.state === 'loading' ? <Loading what="scans" /> : null}
      {scans.state === 'error' ? <ErrorState error={scans.error} retry={scans.reload} /> : null}
      {scans.state === 'ready' && all.length === 0 ? (
        <Empty title="No scans yet">
          {hasScope(me, 'write:scans') || hasScope(me, '*') ? (
            <>
              Import a DICOM folder or disc on the <a href="#/import">Import</a> screen; imported series appear here.
            </>
          ) : (
            'Ask someone with import rights to import DICOM studies; they will appear here.'
          )}
        </Empty>
      ) : null}
      {scans.state === 'ready' && all.length > 0 && rows.length === 0 ? <Empty title="No scan matches these filters">Clear a filter to see more.</Empty> : null}
      {rows.length > 0 ? (
        <table className="grid" data-testid="worklist-table">
          <thead>
            <tr>
              <th aria-label="Thumbnail" />
              {header('patient', 'Patient')}
              {header('modality', 'Modality')}
              <th>Description</th>
              {header('date', 'Study date')}
              <th>Images</th>
              {header('status', 'Status')}
              {header('ai', 'AI summary')}
              {canAnalyse ? <th aria-label="Actions" /> : null}
            </tr>
          </thead>
          <tbody>
            {rows.map((scan, index) => (
              <tr
                key={scan.scan_id}
                className={index === selected ? 'selected' : ''}
                onClick={() => setSelected(index)}
                onDoubleClick={() => navigate({ name: 'viewer', scanId: scan.scan_id })}
                data-testid="scan-row"
                data-scan-id={scan.scan_id}
              >
                <td>
                  <Thumbnail scanId={scan.scan_id} />
                </td>
                <td className="nowrap">
                  <a href={`#/scan/${encodeURIComponent(scan.scan_id)}`} data-testid="open-scan">
                    {scan.patient_id}
                  </a>
                </td>
                <td>{scan.modality}</td>
                <td>{scan.description ?? scan.study_description ?? '—'}</td>
                <td className="nowrap">{dicomDate(scan.study_date)}</td>
                <td className="num">{scan.instance_count}</td>
                <td>
                  <span className={`status status-${scan.status}`} title={scan.status_reason ?? undefined}>
                    {BUSY_STATUSES.has(scan.status) ? '⟳ ' : ''}
                    {scan.status.replace('_', ' ')}
                  </span>
                  {analyses.runs.has(scan.scan_id) ? (
                    <AnalysisStatus run={analyses.runs.get(scan.scan_id)} />
                  ) : scan.status === 'failed' && scan.status_reason ? (
                    <div className="run run-bad" data-testid="status-reason">
                      {scan.status_reason}
                    </div>
                  ) : null}
                </td>
                <td data-testid="ai-summary" className="nowrap">
                  {scan.ai_summary ? (
                    <span className="ai">
                      {labelText(scan.ai_summary.label)} <b>{percent(scan.ai_summary.confidence)}</b>
                    </span>
                  ) : scan.status === 'analyzed' || scan.status === 'in_review' || scan.status === 'reviewed' || scan.status === 'reported' ? (
                    <span className="muted">no finding</span>
                  ) : (
                    <span className="muted">not analysed</span>
                  )}
                </td>
                {canAnalyse ? (
                  <td className="actions">
                    <AnalyseButton scan={scan} compact />
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
