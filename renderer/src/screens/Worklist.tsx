/**
 * The worklist: studies (patient name and ID, accession, date, description, modalities, triage
 * priority) that open to their series, each with modality, status, triage reason and the AI
 * summary; filters, sorting (urgent first by default), thumbnails, and live progress while scans
 * are queued or analysing and while any import runs. Statuses move on the server as scans are
 * read (in review, reviewed, reported), so the list is loaded afresh whenever the worklist opens
 * or the window regains focus. At hospital scale (issue 15: 100,000 series) the studies arrive
 * page by page behind the first (use-study-pages.ts) and only the rows in view are drawn
 * (worklist-window.ts).
 * Keys: ↑/↓ or j/k select a series, Enter opens it, ←/→ close/open its study, / focuses the
 * search, shift+A analyses the selected scan (a plain `a` means accept in the viewer).
 */
import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type UIEvent } from 'react';
import { SCAN_STATUSES } from '../../../common/vocabulary.ts';
import type { Scan, Triage } from '../api/types.ts';
import { useAnalyses, type AnalysisRun } from '../analyses.ts';
import { AnalyseButton, AnalysisStatus, useCanAnalyse, useRequestAnalysis } from '../components/AnalysisControls.tsx';
import { Empty, ErrorState, Loading } from '../components/StateMessage.tsx';
import { Thumbnail } from '../components/Thumbnail.tsx';
import { dicomDate, labelText, percent } from '../format.ts';
import { navigate, routeHash } from '../route.ts';
import { hasScope, useSession } from '../session.ts';
import { useImportActivity } from '../use-import-activity.ts';
import { useStudyPages } from '../use-study-pages.ts';
import '../worklist.css';
import { DEFAULT_SORT, patientText, warmSearch, worklistRows, type Filters, type Sort, type SortKey, type StudyRow } from '../worklist-rows.ts';
import { lineOffsets, visibleLines, type Line } from '../worklist-window.ts';

const BUSY_STATUSES = new Set(['queued', 'analyzing']);
const NO_FILTERS: Filters = { search: '', modality: '', status: '', aiOnly: false };

const PRIORITY_TEXT = { urgent: 'Urgent', soon: 'Soon', routine: 'Routine' } as const;

/** The priority and, beside it, the finding behind it; the whole reason also as a tooltip. */
function TriageCell({ triage, empty }: { triage: Triage | null; empty: string }) {
  if (!triage) return <span className="muted">{empty}</span>;
  const title = triage.reason ? `${PRIORITY_TEXT[triage.priority]}: ${triage.reason}` : `${PRIORITY_TEXT[triage.priority]}: no finding at or above threshold`;
  return (
    <span className="triage" title={title} data-testid="triage" data-priority={triage.priority}>
      <span className={`priority priority-${triage.priority}`}>{PRIORITY_TEXT[triage.priority]}</span>
      {triage.reason ? <span className="triage-reason" data-testid="triage-reason">{triage.reason}</span> : null}
    </span>
  );
}

// Memoized: a scroll that draws a few new lines leaves the drawn ones alone.
const StudyLine = memo(function StudyLine({ row: { study, series }, open, canAnalyse, onToggle }: { row: StudyRow; open: boolean; canAnalyse: boolean; onToggle: (studyUid: string) => void }) {
  const urgent = study.triage?.priority === 'urgent';
  return (
    <tr
      className={`study-row${urgent ? ' urgent' : ''}`}
      onClick={() => onToggle(study.study_uid)}
      data-testid="study-row"
      data-study-uid={study.study_uid}
      data-priority={study.triage?.priority ?? 'none'}
      aria-expanded={open}
    >
      <td>
        <button type="button" className="link-button toggle" aria-label={open ? 'Close study' : 'Open study'} data-testid="study-toggle">
          {open ? '▾' : '▸'}
        </button>
      </td>
      <td className="nowrap">
        <b data-testid="study-patient-name">{patientText(study)}</b>
        {study.patient_name ? (
          <span className="muted" data-testid="study-patient-id">
            {' '}
            · {study.patient_id}
          </span>
        ) : null}
      </td>
      <td className="nowrap" data-testid="study-accession">
        {study.accession_number || '—'}
      </td>
      <td data-testid="study-modalities">{study.modalities.join(', ')}</td>
      <td data-testid="study-description">{study.study_description || '—'}</td>
      <td className="nowrap" data-testid="study-date">
        {dicomDate(study.study_date)}
      </td>
      <td className="num muted" data-testid="study-series-count">
        {series.length === study.series_count ? `${study.series_count} series` : `${series.length} of ${study.series_count} series`}
      </td>
      <td />
      <td data-testid="study-triage">
        <TriageCell triage={study.triage} empty="not analysed" />
      </td>
      <td colSpan={canAnalyse ? 2 : 1} />
    </tr>
  );
});

const SeriesLine = memo(function SeriesLine({
  scan,
  row,
  index,
  selected,
  canAnalyse,
  run,
  onSelect,
}: {
  scan: Scan;
  row: StudyRow;
  index: number;
  selected: boolean;
  canAnalyse: boolean;
  run: AnalysisRun | undefined;
  onSelect: (index: number) => void;
}) {
  return (
    <tr
      className={`series-row${selected ? ' selected' : ''}${scan.triage?.priority === 'urgent' ? ' urgent' : ''}`}
      onClick={() => onSelect(index)}
      onDoubleClick={() => navigate({ name: 'viewer', scanId: scan.scan_id })}
      data-testid="scan-row"
      data-scan-id={scan.scan_id}
      data-priority={scan.triage?.priority ?? 'none'}
    >
      <td>
        <Thumbnail scanId={scan.scan_id} />
      </td>
      <td className="nowrap series-open">
        <a href={`#/scan/${encodeURIComponent(scan.scan_id)}`} data-testid="open-scan" title={`Open series ${scan.series_number ?? ''} of ${patientText(row.study)}`}>
          {scan.patient_id}
        </a>
        {scan.series_number !== null ? <span className="muted"> · #{scan.series_number}</span> : null}
      </td>
      <td />
      <td>{scan.modality}</td>
      <td>{scan.description ?? scan.study_description ?? '—'}</td>
      <td className="nowrap">{dicomDate(scan.study_date)}</td>
      <td className="num">{scan.instance_count}</td>
      <td>
        <span className={`status status-${scan.status}`} title={scan.status_reason ?? undefined}>
          {BUSY_STATUSES.has(scan.status) ? '⟳ ' : ''}
          {scan.status.replace('_', ' ')}
        </span>
        {run ? (
          <AnalysisStatus run={run} />
        ) : scan.status === 'failed' && scan.status_reason ? (
          <div className="run run-bad" data-testid="status-reason">
            {scan.status_reason}
          </div>
        ) : null}
      </td>
      <td>
        <TriageCell triage={scan.triage} empty="—" />
      </td>
      <td data-testid="ai-summary" className="nowrap">
        {scan.ai_summary?.review === 'rejected' ? (
          // Still what the model said, but struck through: beside a priority the reader lowered, it must not read as open.
          <span className="ai muted" title="The reader rejected this finding" data-review="rejected">
            <s>
              {labelText(scan.ai_summary.label)} {percent(scan.ai_summary.confidence)}
            </s>{' '}
            rejected
          </span>
        ) : scan.ai_summary ? (
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
  );
});

export function Worklist() {
  const { client, setScanOrder, me } = useSession();
  const studies = useStudyPages(client);
  const [patient, setPatient] = useState('');
  const [modality, setModality] = useState('');
  const [status, setStatus] = useState('');
  const [aiOnly, setAiOnly] = useState(false);
  const [sort, setSort] = useState<Sort>(DEFAULT_SORT);
  // Studies are open by default, so every series row is one keystroke away; closing is per study.
  const [closed, setClosed] = useState<ReadonlySet<string>>(() => new Set());
  const [selected, setSelected] = useState(0);
  const filterRef = useRef<HTMLInputElement>(null);
  const analyses = useAnalyses();
  const canAnalyse = useCanAnalyse();
  const requestAnalysis = useRequestAnalysis();

  const scans = studies;
  const allStudies = useMemo(() => (studies.state === 'ready' ? studies.value : []), [studies]);
  const all = useMemo(() => allStudies.flatMap((study) => study.series), [allStudies]);
  const modalities = useMemo(() => [...new Set(all.map((s) => s.modality))].sort(), [all]);
  // The unfiltered order is kept apart: clearing a search then costs nothing (sorting 40,000
  // studies takes a few hundred ms), and a search sorts only the studies it matched.
  const unfiltered = useMemo(() => worklistRows(allStudies, NO_FILTERS, sort), [allStudies, sort]);
  const studyRows = useMemo(
    () => (patient === '' && modality === '' && status === '' && !aiOnly ? unfiltered : worklistRows(allStudies, { search: patient, modality, status, aiOnly }, sort)),
    [unfiltered, allStudies, patient, modality, status, aiOnly, sort],
  );
  const everyStudy = studies.state === 'ready' && studies.complete ? studies.value : null;
  useEffect(() => {
    if (!everyStudy) return;
    const controller = new AbortController();
    warmSearch(everyStudy, controller.signal, (work) => requestIdleCallback(work));
    return () => controller.abort();
  }, [everyStudy]);
  // Every series that passes the filters, in list order: the viewer's next/previous scan.
  const matching = useMemo(() => studyRows.flatMap((row) => row.series), [studyRows]);
  // The lines of the table (study rows, and the series rows of open studies) and, among them,
  // the series rows: what j/k and Enter move through.
  const { lines, rows, lineOfRow } = useMemo(() => {
    const lines: Line[] = [];
    const rows: Scan[] = [];
    const lineOfRow: number[] = [];
    for (const row of studyRows) {
      lines.push({ kind: 'study', row });
      if (closed.has(row.study.study_uid)) continue;
      for (const scan of row.series) {
        lineOfRow.push(lines.length);
        lines.push({ kind: 'series', row, scan, index: rows.length });
        rows.push(scan);
      }
    }
    return { lines, rows, lineOfRow };
  }, [studyRows, closed]);
  const toggleStudy = useCallback(
    (studyUid: string, open?: boolean) =>
      setClosed((current) => {
        const next = new Set(current);
        if (open ?? next.has(studyUid)) next.delete(studyUid);
        else next.add(studyUid);
        return next;
      }),
    [],
  );

  useEffect(() => setScanOrder(matching.map((s) => s.scan_id)), [matching, setScanOrder]);

  // Live progress: while anything is queued or analysing, refresh the list every 2 s.
  const busy = useMemo(() => all.some((s) => BUSY_STATUSES.has(s.status)), [all]);
  const unanalysed = useMemo(() => all.filter((s) => s.status === 'received' && !analyses.runs.has(s.scan_id)), [all, analyses.runs]);
  const { reload, refresh } = scans;
  // A run started here ended: the list now has its status and AI summary.
  useEffect(() => {
    if (analyses.finished > 0) reload();
  }, [analyses.finished, reload]);

  useEffect(() => {
    if (!busy) return;
    const timer = setInterval(refresh, 2000);
    return () => clearInterval(timer);
  }, [busy, refresh]);

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
      } else if (event.key === 'ArrowLeft' || event.key === 'ArrowRight') {
        const scan = rows[selected];
        if (scan) toggleStudy(scan.study_uid, event.key === 'ArrowRight');
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
  // A series that was selected may now sit in a closed study or behind a filter.
  useEffect(() => setSelected((i) => Math.min(i, Math.max(0, rows.length - 1))), [rows.length]);

  // Virtualized rows (issue 15): only the lines near the scrolled-to window are in the DOM.
  const scroller = useRef<HTMLDivElement>(null);
  const offsets = useMemo(() => lineOffsets(lines), [lines]);
  const offsetsRef = useRef(offsets);
  offsetsRef.current = offsets;
  const [view, setView] = useState({ top: 0, height: 1000 });
  const { start, end } = visibleLines(offsets, view.top, view.height);
  // A scroll within the drawn window changes nothing on screen: no render for it.
  const onScroll = useCallback((event: UIEvent<HTMLDivElement>) => {
    const { scrollTop, clientHeight } = event.currentTarget;
    setView((current) => {
      const [drawn, wanted] = [visibleLines(offsetsRef.current, current.top, current.height), visibleLines(offsetsRef.current, scrollTop, clientHeight)];
      return drawn.start === wanted.start && drawn.end === wanted.end ? current : { top: scrollTop, height: clientHeight };
    });
  }, []);
  const selectRow = useCallback((index: number) => setSelected(index), []);
  useLayoutEffect(() => {
    const element = scroller.current;
    if (!element) return;
    const measure = () => setView({ top: element.scrollTop, height: element.clientHeight });
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, [lines.length > 0]);
  // The selected series stays in view as j/k move it (its row may not be drawn yet to scroll to).
  // Only a new selection scrolls: pages arriving while the reader scrolls must not pull the list
  // back to it.
  const lineOfRowRef = useRef(lineOfRow);
  lineOfRowRef.current = lineOfRow;
  useEffect(() => {
    const element = scroller.current;
    const line = lineOfRowRef.current[selected];
    if (!element || line === undefined) return;
    const header = element.querySelector('thead')?.getBoundingClientRect().height ?? 0;
    const [top, bottom] = [offsetsRef.current[line]!, offsetsRef.current[line + 1]!];
    if (top < element.scrollTop) element.scrollTop = top;
    else if (bottom + header > element.scrollTop + element.clientHeight) element.scrollTop = bottom + header - element.clientHeight;
  }, [selected]);

  const header = (key: SortKey, text: string) => (
    <th
      aria-sort={sort.key === key ? (sort.descending ? 'descending' : 'ascending') : 'none'}
      onClick={() => setSort((s) => ({ key, descending: s.key === key ? !s.descending : key === 'date' || key === 'ai' || key === 'priority' }))}
      className={`sortable col-${key}`}
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
          placeholder="Name, ID, accession, description  ( / )"
          title="Search by patient name (accents optional), patient ID, accession number or description"
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
        <a href={routeHash({ name: 'pacs' })} className="toolbar-link" data-testid="open-search-pacs" title="Search a PACS or DICOMweb server and retrieve studies and priors into this archive">
          Search PACS
        </a>
        <span className="count" data-testid="worklist-count">
          {scans.state === 'ready' ? `${matching.length} of ${all.length} scans` : ''}
        </span>
        {scans.state === 'ready' && !scans.complete ? (
          <span className="live" data-testid="worklist-loading" title="Later studies are still being read; sorting and counts cover those read so far">
            ● reading more studies
          </span>
        ) : null}
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
      {scans.state === 'ready' && all.length > 0 && matching.length === 0 ? <Empty title="No scan matches these filters">Clear a filter to see more.</Empty> : null}
      {studyRows.length > 0 ? (
        <div className="worklist-scroll" ref={scroller} onScroll={onScroll} data-testid="worklist-scroll">
          <table className="grid worklist-grid" data-testid="worklist-table">
            <thead>
              <tr>
                <th className="col-thumb" aria-label="Thumbnail" />
                {header('patient', 'Patient')}
                <th className="col-accession">Accession</th>
                {header('modality', 'Modality')}
                <th className="col-description">Description</th>
                {header('date', 'Study date')}
                <th className="col-images">Images</th>
                {header('status', 'Status')}
                {header('priority', 'Priority')}
                {header('ai', 'AI summary')}
                {canAnalyse ? <th className="col-actions" aria-label="Actions" /> : null}
              </tr>
            </thead>
            <tbody>
              {start > 0 ? <tr className="spacer" aria-hidden="true" style={{ height: offsets[start] }} /> : null}
              {lines.slice(start, end).map((line) =>
                line.kind === 'study' ? (
                  <StudyLine key={line.row.study.study_uid} row={line.row} open={!closed.has(line.row.study.study_uid)} canAnalyse={canAnalyse} onToggle={toggleStudy} />
                ) : (
                  <SeriesLine
                    key={line.scan.scan_id}
                    scan={line.scan}
                    row={line.row}
                    index={line.index}
                    selected={line.index === selected}
                    canAnalyse={canAnalyse}
                    run={analyses.runs.get(line.scan.scan_id)}
                    onSelect={selectRow}
                  />
                ),
              )}
              {end < lines.length ? <tr className="spacer" aria-hidden="true" style={{ height: (offsets[lines.length] ?? 0) - (offsets[end] ?? 0) }} /> : null}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
