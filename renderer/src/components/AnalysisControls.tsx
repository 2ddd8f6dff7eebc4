/**
 * The Analyse / Analyse again action and the live state of a run, shared by the worklist rows
 * and the viewer. Each end state says what happened and what to do next.
 */
import type { Scan } from '../api/types.ts';
import { isActive, useAnalyses, type AnalysisRun } from '../analyses.ts';
import { hasScope, useSession } from '../session.ts';

const RESULT_STATUSES = new Set(['analyzed', 'in_review', 'reviewed', 'reported', 'failed']);
const BUSY_STATUSES = new Set(['queued', 'analyzing']);

/** Starting an analysis needs write:scans (POST /v1/scans/{id}/analyses). */
export function useCanAnalyse(): boolean {
  const { me } = useSession();
  return hasScope(me, 'write:scans');
}

export function AnalyseButton({ scan, compact = false }: { scan: Pick<Scan, 'scan_id' | 'status' | 'ai_summary'>; compact?: boolean }) {
  const { runs, start, cancel } = useAnalyses();
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
        start(scan.scan_id);
      }}
      data-testid="analyse-scan"
      title={busyElsewhere ? 'An analysis of this scan is already queued or running' : 'Run the selected AI model on this scan (shift+A)'}
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
      return <div {...common} className="run run-bad">{run.reason}</div>;
  }
}
