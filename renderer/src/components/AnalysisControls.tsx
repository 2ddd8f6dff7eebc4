/**
 * The Analyse / Analyse again action and the live state of a run, shared by the worklist rows
 * and the viewer. Running the AI again over reviewed findings or a drafted report asks first
 * (reanalysis.ts). Each end state says what happened and what to do next.
 */
import { useCallback } from 'react';
import type { Page, Report, Scan } from '../api/types.ts';
import { isActive, useAnalyses, type AnalysisRun } from '../analyses.ts';
import { mayHoldWork, reanalysisQuestion } from '../reanalysis.ts';
import { hasScope, useSession } from '../session.ts';

export type AnalysableScan = Pick<Scan, 'scan_id' | 'status' | 'ai_summary' | 'patient_id' | 'modality'>;

const RESULT_STATUSES = new Set(['analyzed', 'in_review', 'reviewed', 'reported', 'failed']);
const BUSY_STATUSES = new Set(['queued', 'analyzing']);

/** Starting an analysis needs write:scans (POST /v1/scans/{id}/analyses). */
export function useCanAnalyse(): boolean {
  const { me } = useSession();
  return hasScope(me, 'write:scans');
}

/**
 * Starts an analysis of `scan`, first asking for confirmation when it would replace reviewed
 * findings or the result a report was drafted from. `reviewedHere`: verdicts the calling screen
 * holds that the scan's status may not show yet (the viewer's own reviews).
 */
export function useRequestAnalysis(): (scan: AnalysableScan, reviewedHere?: boolean) => Promise<void> {
  const { client, me } = useSession();
  const { start } = useAnalyses();
  return useCallback(
    async (scan, reviewedHere = false) => {
      let reports: number | null = null;
      if (mayHoldWork(scan.status) && scan.status !== 'reported' && hasScope(me, 'read:reports')) {
        try {
          reports = (await client.get<Page<Report>>('/v1/reports', { query: { scan_id: scan.scan_id, limit: 1 } })).items.length;
        } catch {
          // Not knowing about a report must not block analysing; the question falls back to reviews.
          reports = null;
        }
      }
      const question = reanalysisQuestion(`${scan.patient_id} ${scan.modality}`, { status: scan.status, reviewedHere, reports });
      if (question !== null && !window.confirm(question)) return;
      start(scan.scan_id);
    },
    [client, me, start],
  );
}

export function AnalyseButton({ scan, compact = false, reviewedHere = false }: { scan: AnalysableScan; compact?: boolean; reviewedHere?: boolean }) {
  const { runs, cancel } = useAnalyses();
  const request = useRequestAnalysis();
  const run = runs.get(scan.scan_id);
  const active = isActive(run);
  if (active && run?.jobId) {
    return (
      <button type="button" onClick={(e) => {
          e.stopPropagation();
          cancel(scan.scan_id);
        }} data-testid="cancel-analysis" title="Cancel this analysis">
        Cancel
      </button>
    );
  }
  const again = scan.ai_summary !== null || RESULT_STATUSES.has(scan.status) || run?.phase === 'succeeded';
  const busyElsewhere = !run && BUSY_STATUSES.has(scan.status);
  return (
    <button
      type="button"
      className={compact ? '' : 'primary'}
      disabled={active || busyElsewhere}
      onClick={(e) => {
        e.stopPropagation();
        void request(scan, reviewedHere);
      }}
      data-testid="analyse-scan"
      title={
        busyElsewhere
          ? 'An analysis of this scan is already queued or running'
          : scan.status === 'reported'
            ? 'This scan is reported (its report is final); the server does not analyse it again'
            : 'Run the selected AI model on this scan (shift+A)'
      }
    >
      {again ? 'Analyse again' : 'Analyse'}
    </button>
  );
}

function slicesText(run: AnalysisRun): string {
  return run.total ? `${run.done} / ${run.total} slices` : 'preparing';
}

export function AnalysisStatus({ run }: { run: AnalysisRun | undefined }) {
  if (!run) return null;
  const common = { 'data-testid': 'analysis-status', 'data-phase': run.phase, role: 'status' } as const;
  switch (run.phase) {
    case 'starting':
      return <div {...common} className="run run-busy">Starting analysis…</div>;
    case 'queued':
      return <div {...common} className="run run-busy">⟳ Queued — waits for a free analysis slot</div>;
    case 'running': {
      const share = run.total ? Math.round((100 * run.done) / run.total) : 0;
      return (
        <div {...common} className="run run-busy">
          <span>⟳ Analysing {slicesText(run)}</span>
          <div className="progress" aria-hidden="true">
            <div style={{ width: `${share}%` }} />
          </div>
        </div>
      );
    }
    case 'succeeded':
      return (
        <div {...common} className="run run-ok">
          Analysed: {run.findings === null ? 'done' : run.findings === 1 ? '1 finding' : `${run.findings} findings`}
          {run.model ? ` · ${run.model}` : ''}
        </div>
      );
    case 'not_applicable':
      return (
        <div {...common} className="run run-na">
          Not applicable: {run.reason ?? 'the model does not apply to this scan'}. Nothing was analysed; read it without AI.
        </div>
      );
    case 'failed':
      return (
        <div {...common} className="run run-bad">
          Analysis failed: {run.reason ?? 'no reason given'}. Fix the cause (re-import a damaged series) and press Analyse again.
        </div>
      );
    case 'cancelled':
      return <div {...common} className="run run-na">Analysis cancelled; press Analyse to run it again.</div>;
    case 'error':
      return (
        <div {...common} className="run run-bad" role="alert">
          {run.refusedWith === 409 ? 'Not analysed: ' : 'Analysis request failed: '}
          {run.reason}
        </div>
      );
  }
}
