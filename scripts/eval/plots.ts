/**
 * The evaluation's plots: FROC curves and the reliability diagram, drawn as SVG and rendered to
 * PNG by Chromium (the browser the UI tests already use), so a person can open and look at them.
 * Without Chromium the SVG files are still written.
 */
import { existsSync, writeFileSync } from 'node:fs';
import type { FrocPoint } from './froc.ts';
import type { ReliabilityBin } from './calibration-fit.ts';

const W = 640;
const H = 480;
const M = { left: 70, right: 20, top: 40, bottom: 60 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

type Axis = { min: number; max: number; ticks: readonly number[]; label: string; log?: boolean };

function frame(title: string, x: Axis, y: Axis, body: (px: (v: number) => number, py: (v: number) => number) => string): string {
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const fx = (v: number): number => (x.log ? (Math.log(v) - Math.log(x.min)) / (Math.log(x.max) - Math.log(x.min)) : (v - x.min) / (x.max - x.min));
  const px = (v: number): number => M.left + Math.min(1, Math.max(0, fx(v))) * iw;
  const py = (v: number): number => M.top + ih - Math.min(1, Math.max(0, (v - y.min) / (y.max - y.min))) * ih;
  const grid = [
    ...x.ticks.map((t) => `<line x1="${px(t)}" y1="${M.top}" x2="${px(t)}" y2="${M.top + ih}" stroke="#ddd"/><text x="${px(t)}" y="${M.top + ih + 18}" text-anchor="middle">${t}</text>`),
    ...y.ticks.map((t) => `<line x1="${M.left}" y1="${py(t)}" x2="${M.left + iw}" y2="${py(t)}" stroke="#ddd"/><text x="${M.left - 8}" y="${py(t) + 4}" text-anchor="end">${t}</text>`),
  ].join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, sans-serif" font-size="12">
<rect width="${W}" height="${H}" fill="white"/>
<text x="${W / 2}" y="22" text-anchor="middle" font-size="13" font-weight="bold">${esc(title)}</text>
${grid}
<rect x="${M.left}" y="${M.top}" width="${iw}" height="${ih}" fill="none" stroke="#333"/>
<text x="${M.left + iw / 2}" y="${H - 18}" text-anchor="middle">${esc(x.label)}</text>
<text transform="translate(18 ${M.top + ih / 2}) rotate(-90)" text-anchor="middle">${esc(y.label)}</text>
${body(px, py)}
</svg>`;
}

function legend(entries: readonly { name: string; colour: string; dash?: string }[]): string {
  return entries
    .map((e, i) => {
      const y = M.top + 16 + i * 18;
      const x = W - M.right - 190;
      return `<line x1="${x}" y1="${y}" x2="${x + 24}" y2="${y}" stroke="${e.colour}" stroke-width="2.5"${e.dash ? ` stroke-dasharray="${e.dash}"` : ''}/><text x="${x + 30}" y="${y + 4}">${esc(e.name)}</text>`;
    })
    .join('');
}

export type Curve = { name: string; points: readonly FrocPoint[] };

/** FROC: sensitivity against false positives per series on a log axis (LUNA16's 0.125-8, from 1/16). */
export function frocSvg(title: string, curves: readonly Curve[], marks: readonly { name: string; fp: number; sensitivity: number }[] = []): string {
  const x: Axis = { min: 0.0625, max: 8, ticks: [0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8], label: 'false positives per series', log: true };
  const y: Axis = { min: 0, max: 1, ticks: [0, 0.2, 0.4, 0.6, 0.8, 1], label: 'lesion sensitivity' };
  return frame(title, x, y, (px, py) => {
    const lines = curves.map((c, i) => {
      // A step curve: sensitivity holds until the next point.
      const pts = [...c.points].sort((a, b) => a.false_positives_per_series - b.false_positives_per_series || a.sensitivity - b.sensitivity);
      let d = '';
      let lastY = 0;
      for (const p of pts) {
        const fp = Math.max(x.min, p.false_positives_per_series);
        d += d === '' ? `M${px(fp)},${py(lastY)}` : '';
        d += ` L${px(fp)},${py(lastY)} L${px(fp)},${py(p.sensitivity)}`;
        lastY = p.sensitivity;
      }
      if (d !== '') d += ` L${px(x.max)},${py(lastY)}`;
      return `<path d="${d}" fill="none" stroke="${COLOURS[i % COLOURS.length]}" stroke-width="${i === 0 ? 2.5 : 1.5}"/>`;
    });
    // Labels stack downwards: operating points often land on the same spot.
    const dots = marks.map((m, i) => `<circle cx="${px(Math.max(x.min, m.fp))}" cy="${py(m.sensitivity)}" r="4.5" fill="black"/><text x="${px(Math.max(x.min, m.fp)) + 7}" y="${py(m.sensitivity) + 14 + i * 13}" font-size="11">${esc(m.name)} (${m.fp.toFixed(2)}, ${m.sensitivity.toFixed(2)})</text>`);
    return lines.join('') + dots.join('') + legend(curves.map((c, i) => ({ name: c.name, colour: COLOURS[i % COLOURS.length] as string })));
  });
}

/** Reliability diagram: observed frequency against mean confidence per bin, with bin counts. */
export function reliabilitySvg(title: string, sets: readonly { name: string; bins: readonly ReliabilityBin[]; ece: number }[]): string {
  const axis: Axis = { min: 0, max: 1, ticks: [0, 0.2, 0.4, 0.6, 0.8, 1], label: 'confidence' };
  return frame(title, axis, { ...axis, label: 'observed fraction right' }, (px, py) => {
    const diagonal = `<line x1="${px(0)}" y1="${py(0)}" x2="${px(1)}" y2="${py(1)}" stroke="#888" stroke-dasharray="5 4"/>`;
    const series = sets.map((set, i) => {
      const colour = COLOURS[i % COLOURS.length] as string;
      const used = set.bins.filter((b) => b.count > 0 && b.mean_confidence !== null && b.observed !== null);
      const d = used.map((b, k) => `${k === 0 ? 'M' : 'L'}${px(b.mean_confidence as number)},${py(b.observed as number)}`).join(' ');
      const dots = used.map((b) => `<circle cx="${px(b.mean_confidence as number)}" cy="${py(b.observed as number)}" r="${Math.min(9, 2.5 + Math.log10(b.count + 1) * 2)}" fill="${colour}" fill-opacity="0.6"/>`).join('');
      return `<path d="${d}" fill="none" stroke="${colour}" stroke-width="2"/>${dots}`;
    });
    return diagonal + series.join('') + legend([...sets.map((s, i) => ({ name: `${s.name} (ECE ${s.ece.toFixed(3)})`, colour: COLOURS[i % COLOURS.length] as string })), { name: 'perfect calibration', colour: '#888', dash: '5 4' }]);
  });
}

const CHROMIUM = '/usr/bin/chromium';

/** Writes each SVG and, when Chromium is there, its PNG. Returns the PNG paths written. */
export async function writePlots(plots: readonly { path: string; svg: string }[]): Promise<string[]> {
  for (const p of plots) writeFileSync(p.path.replace(/\.png$/, '.svg'), p.svg);
  if (!existsSync(CHROMIUM)) return [];
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: W, height: H } });
    for (const p of plots) {
      await page.setContent(`<!doctype html><html><body style="margin:0">${p.svg}</body></html>`);
      await page.screenshot({ path: p.path, clip: { x: 0, y: 0, width: W, height: H } });
    }
  } finally {
    await browser.close();
  }
  return plots.map((p) => p.path);
}
