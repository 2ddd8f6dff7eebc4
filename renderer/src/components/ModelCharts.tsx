/**
 * The Models screen's two plots of a model's held-out evaluation: the FROC curve (lesion
 * sensitivity against false positives per series, log axis) with the operating points on it, and
 * the reliability diagram (how often findings of a given confidence were right). Plain SVG from
 * the figures GET /v1/models serves; nothing is computed here but positions.
 */
import type { FrocPoint, OperatingPoint, ReliabilityBin } from '../api/types.ts';

const W = 320;
const H = 220;
const M = { left: 40, right: 10, top: 10, bottom: 34 };
const IW = W - M.left - M.right;
const IH = H - M.top - M.bottom;
const FP_MIN = 1 / 16;
const FP_MAX = 8;
const FP_TICKS = [0.125, 0.25, 0.5, 1, 2, 4, 8];
const UNIT_TICKS = [0, 0.25, 0.5, 0.75, 1];

const fpX = (fp: number): number => M.left + ((Math.log(Math.min(FP_MAX, Math.max(FP_MIN, fp))) - Math.log(FP_MIN)) / (Math.log(FP_MAX) - Math.log(FP_MIN))) * IW;
const unitX = (v: number): number => M.left + Math.min(1, Math.max(0, v)) * IW;
const unitY = (v: number): number => M.top + IH - Math.min(1, Math.max(0, v)) * IH;

function Axes({ xTicks, x, xLabel, yLabel }: { xTicks: readonly number[]; x: (v: number) => number; xLabel: string; yLabel: string }) {
  return (
    <g className="chart-axes">
      {xTicks.map((t) => (
        <g key={`x${t}`}>
          <line x1={x(t)} y1={M.top} x2={x(t)} y2={M.top + IH} className="chart-grid" />
          <text x={x(t)} y={M.top + IH + 13} textAnchor="middle">
            {t}
          </text>
        </g>
      ))}
      {UNIT_TICKS.map((t) => (
        <g key={`y${t}`}>
          <line x1={M.left} y1={unitY(t)} x2={M.left + IW} y2={unitY(t)} className="chart-grid" />
          <text x={M.left - 4} y={unitY(t) + 4} textAnchor="end">
            {t}
          </text>
        </g>
      ))}
      <rect x={M.left} y={M.top} width={IW} height={IH} className="chart-frame" />
      <text x={M.left + IW / 2} y={H - 4} textAnchor="middle">
        {xLabel}
      </text>
      <text transform={`translate(10 ${M.top + IH / 2}) rotate(-90)`} textAnchor="middle">
        {yLabel}
      </text>
    </g>
  );
}

export function FrocChart({ froc, points }: { froc: readonly FrocPoint[]; points: readonly OperatingPoint[] }) {
  const sorted = [...froc].sort((a, b) => a.false_positives_per_series - b.false_positives_per_series || a.sensitivity - b.sensitivity);
  let path = '';
  let last = 0;
  for (const p of sorted) {
    path += `${path === '' ? `M${fpX(p.false_positives_per_series)},${unitY(0)}` : ''} L${fpX(p.false_positives_per_series)},${unitY(last)} L${fpX(p.false_positives_per_series)},${unitY(p.sensitivity)}`;
    last = p.sensitivity;
  }
  if (path !== '') path += ` L${fpX(FP_MAX)},${unitY(last)}`;
  return (
    <svg className="chart" viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label="FROC curve" data-testid="froc-chart">
      <Axes xTicks={FP_TICKS} x={fpX} xLabel="false positives per series" yLabel="sensitivity" />
      <path d={path} className="chart-line" />
      {points.map((p) =>
        p.measured && p.measured.sensitivity !== null ? (
          <g key={p.name} data-testid="froc-point" data-name={p.name}>
            <circle cx={fpX(p.measured.false_positives_per_series)} cy={unitY(p.measured.sensitivity)} r={p.selected ? 6 : 4} className={p.selected ? 'chart-point chart-point-selected' : 'chart-point'}>
              <title>{`${p.display_name}: sensitivity ${p.measured.sensitivity.toFixed(3)} at ${p.measured.false_positives_per_series.toFixed(2)} false positives per series`}</title>
            </circle>
          </g>
        ) : null,
      )}
    </svg>
  );
}

export function ReliabilityChart({ bins }: { bins: readonly ReliabilityBin[] }) {
  const used = bins.filter((b) => b.count > 0 && b.mean_confidence !== null && b.observed !== null);
  const path = used.map((b, i) => `${i === 0 ? 'M' : 'L'}${unitX(b.mean_confidence as number)},${unitY(b.observed as number)}`).join(' ');
  return (
    <svg className="chart" viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label="Reliability diagram" data-testid="reliability-chart">
      <Axes xTicks={UNIT_TICKS} x={unitX} xLabel="confidence" yLabel="observed fraction right" />
      <line x1={unitX(0)} y1={unitY(0)} x2={unitX(1)} y2={unitY(1)} className="chart-diagonal" />
      <path d={path} className="chart-line" />
      {used.map((b) => (
        <circle key={b.low} cx={unitX(b.mean_confidence as number)} cy={unitY(b.observed as number)} r={Math.min(7, 2 + Math.log10(b.count + 1) * 1.6)} className="chart-point">
          <title>{`${b.count} findings with confidence ${b.low.toFixed(1)}-${b.high.toFixed(1)}: ${((b.observed as number) * 100).toFixed(0)}% right`}</title>
        </circle>
      ))}
    </svg>
  );
}
