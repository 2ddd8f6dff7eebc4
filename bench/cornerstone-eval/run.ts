/**
 * Cornerstone3D evaluation driver (issue 11): installs @cornerstonejs/core and tools into a temp
 * directory of its own (npm install --prefix; nothing is added to mia's package.json), bundles
 * page.js with esbuild, serves it with a 60-slice 512x512 CT-like series in mia's raw-frame format,
 * and drives Debian's Chromium (playwright-core from mia's node_modules) with the flags mia's tests
 * use. Prints one JSON object of figures and writes screenshots next to it.
 *
 *   node --import tsx bench/cornerstone-eval/run.ts [--deps DIR] [--out DIR]
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type * as Esbuild from 'esbuild';
import { chromium, type Browser, type Page } from 'playwright-core';
import { UI_CONTENT_SECURITY_POLICY } from '#server/http/static-ui.ts';

const HERE = import.meta.dirname;
const REPO = join(HERE, '..', '..');
const VERSION = '5.14.0';
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const DEPS = arg('--deps', join(tmpdir(), 'mia-cs3d-eval-deps'));
const OUT = arg('--out', join(tmpdir(), 'mia-cs3d-eval-out'));
mkdirSync(OUT, { recursive: true });

// ------------------------------------------------------------------ dependencies and bundle
if (!existsSync(join(DEPS, 'node_modules', '@cornerstonejs', 'tools', 'package.json'))) {
  mkdirSync(DEPS, { recursive: true });
  writeFileSync(join(DEPS, 'package.json'), JSON.stringify({ name: 'cs3d-eval-deps', private: true }));
  execFileSync('npm', ['install', '--prefix', DEPS, '--save-exact', '--no-audit', '--no-fund', `@cornerstonejs/core@${VERSION}`, `@cornerstonejs/tools@${VERSION}`, 'esbuild@0.28.2'], { stdio: 'inherit' });
}
const esbuild = (await import(join(DEPS, 'node_modules', 'esbuild', 'lib', 'main.js'))) as typeof Esbuild;
const built = await esbuild.build({
  entryPoints: [join(HERE, 'page.js')],
  bundle: true,
  format: 'esm',
  minify: process.env.MINIFY !== '0',
  target: 'es2022',
  nodePaths: [join(DEPS, 'node_modules')],
  outfile: join(OUT, 'page.js'),
  metafile: true,
  logLevel: 'warning',
  // vtk.js pulls in xmlbuilder2 (its XML reader/writer), which requires Node's events and url;
  // a browser build stubs them, as Vite's browser-external does.
  plugins: [{
    name: 'node-builtins',
    setup(b) {
      b.onResolve({ filter: /^(events|url)$/ }, (a) => ({ path: a.path, namespace: 'stub' }));
      b.onLoad({ filter: /.*/, namespace: 'stub' }, (a) => ({
        contents: a.path === 'events' ? 'export class EventEmitter {}; export default { EventEmitter };' : 'export const URL = globalThis.URL; export default { URL };',
        loader: 'js',
      }));
    },
  }],
});
const pageJs = readFileSync(join(OUT, 'page.js'));
const byPackage: Record<string, number> = {};
for (const [file, info] of Object.entries(built.metafile.outputs[Object.keys(built.metafile.outputs)[0] ?? '']?.inputs ?? {})) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
  const key = m?.[1] ?? 'harness + mia frame.ts';
  byPackage[key] = (byPackage[key] ?? 0) + info.bytesInOutput;
}
const kb = (n: number) => Math.round(n / 102.4) / 10;
const bundle = {
  csPageKB: kb(pageJs.length),
  csPageGzipKB: kb(gzipSync(pageJs).length),
  topPackagesKB: Object.fromEntries(Object.entries(byPackage).sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, v]) => [k, kb(v)])),
};

// mia's renderer bundle today, built into a temp directory (renderer/dist is left alone).
function miaRendererBundle(): Record<string, number> {
  const outDir = join(OUT, 'mia-renderer');
  execFileSync(process.execPath, [join(REPO, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'renderer', '--outDir', outDir, '--emptyOutDir', '--logLevel', 'warn'], { cwd: REPO, stdio: 'inherit' });
  const js = readdirSync(join(outDir, 'assets')).filter((f) => f.endsWith('.js')).map((f) => readFileSync(join(outDir, 'assets', f)));
  return { miaJsKB: kb(js.reduce((s, b) => s + b.length, 0)), miaJsGzipKB: kb(js.reduce((s, b) => s + gzipSync(b).length, 0)) };
}
let miaBundle: Record<string, number> | string;
try {
  miaBundle = miaRendererBundle();
} catch (error) {
  miaBundle = `vite build failed: ${String(error)}`;
}

// ------------------------------------------------------------------ the series, mia's raw format
const SLICES = 60;
const SIZE = 512;
/** A head phantom in millimetres, so a non-square pixel grid holds a round head. */
function makeSeries(spacing: [number, number]): Buffer[] {
  const [rowSp, colSp] = spacing;
  let seed = 12345;
  const uniform = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const noise = () => (uniform() + uniform() + uniform() + uniform() - 2) * Math.sqrt(3) * 4; // SD 4 HU
  const frames: Buffer[] = [];
  for (let z = 0; z < SLICES; z += 1) {
    const buf = Buffer.alloc(SIZE * SIZE * 2);
    const lesionR = 15 * Math.max(0, 1 - Math.abs(z - 30) / 20);
    for (let y = 0; y < SIZE; y += 1) {
      for (let x = 0; x < SIZE; x += 1) {
        const mx = (x - SIZE / 2) * colSp;
        const my = (y - SIZE / 2) * rowSp;
        const r = Math.hypot(mx, my);
        let hu = -1000;
        if (r < 90) hu = r > 84 ? 800 : 35 + noise();
        if (r < 84 && Math.hypot(mx + 35, my - 25) < 12) hu = 100 + noise(); // calibration disk, 100 HU
        if (r < 84 && Math.hypot(mx - 30, my + 20) < lesionR) hu = 70 + noise(); // lesion, 70 HU
        buf.writeInt16LE(Math.round(hu) + 1024, (y * SIZE + x) * 2);
      }
    }
    frames.push(buf);
  }
  return frames;
}

type Served = { server: Server; url: string };
function serve(frames: Buffer[], spacing: [number, number], csp: boolean): Promise<Served> {
  const uids = frames.map((_, i) => `1.2.826.0.1.3680043.8.498.3.${i + 1}`);
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>cs3d eval</title><link rel="stylesheet" href="/page.css"></head><body><div id="vp1" class="vp"></div><div id="vp2" class="vp"></div><script type="module" src="/page.js"></script></body></html>`;
  const css = 'body{margin:0;background:#222;display:flex;gap:8px}.vp{width:512px;height:512px;position:relative}';
  const server = createServer((req, res) => {
    if (csp) res.setHeader('Content-Security-Policy', UI_CONTENT_SECURITY_POLICY);
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const frame = /^\/v1\/instances\/([^/]+)\/frames\/0\/raw$/.exec(path);
    if (path === '/favicon.ico') res.writeHead(204).end();
    else if (path === '/' || path === '/index.html') res.writeHead(200, { 'Content-Type': 'text/html' }).end(html);
    else if (path === '/page.js') res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(pageJs);
    else if (path === '/page.css') res.writeHead(200, { 'Content-Type': 'text/css' }).end(css);
    else if (path === '/series.json') res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ uids, rows: SIZE, columns: SIZE, spacing, sliceGap: 2.5 }));
    else if (frame) {
      const body = frames[uids.indexOf(frame[1] ?? '')];
      if (!body) res.writeHead(404).end();
      // The headers of GET /v1/instances/{uid}/frames/{n}/raw (server/imaging/images.ts rawFrame).
      else res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'X-Rows': String(SIZE), 'X-Columns': String(SIZE), 'X-Samples-Per-Pixel': '1', 'X-Bits-Allocated': '16', 'X-Pixel-Representation': '1', 'X-Rescale-Slope': '1', 'X-Rescale-Intercept': '-1024', 'X-Window-Center': '40', 'X-Window-Width': '80', 'X-Photometric-Interpretation': 'MONOCHROME2' }).end(body);
    } else res.writeHead(404).end();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    resolve({ server, url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}` });
  }));
}

// ------------------------------------------------------------------ runs
const browser: Browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});

async function open(url: string): Promise<{ page: Page; console: string[]; result: Record<string, unknown> }> {
  const page = await browser.newPage({ viewport: { width: 1040, height: 530 } });
  const console: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.push(`${m.type()}: ${m.text().slice(0, 300)}`); });
  page.on('pageerror', (e) => console.push(`pageerror: ${e.message.slice(0, 300)}`));
  const started = Date.now();
  await page.goto(url);
  // Locator polling, not waitForFunction: under mia's CSP string evaluation is refused.
  for (;;) {
    const done = await page.evaluate(() => (globalThis as unknown as { evalResult?: { done?: boolean } }).evalResult?.done === true).catch(() => false);
    if (done || Date.now() - started > 60_000) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const result = await page.evaluate(() => (globalThis as unknown as { evalResult?: Record<string, unknown> }).evalResult ?? {}).catch((e: unknown) => ({ evaluateFailed: String(e) }));
  return { page, console, result };
}

type Api = {
  toClient(x: number, y: number): [number, number];
  activate(name: string): void;
  annotations(): { tool: string; stats: Record<string, Record<string, unknown>> }[];
  display(): unknown;
  transform(): void;
  cine(fps: number, ms: number): Promise<number>;
  svgTexts(): number;
};
async function drag(page: Page, from: [number, number], to: [number, number]): Promise<void> {
  const a = await page.evaluate(([x, y]) => (globalThis as unknown as { evalApi: Api }).evalApi.toClient(x, y), from);
  const b = await page.evaluate(([x, y]) => (globalThis as unknown as { evalApi: Api }).evalApi.toClient(x, y), to);
  await page.mouse.move(a[0], a[1]);
  await page.mouse.down();
  for (let s = 1; s <= 10; s += 1) {
    await page.mouse.move(a[0] + ((b[0] - a[0]) * s) / 10, a[1] + ((b[1] - a[1]) * s) / 10);
    await page.waitForTimeout(15);
  }
  await page.mouse.up();
  await page.waitForTimeout(300);
}

/** Draws each measurement with the mouse on slice 30 and reads Cornerstone's own figures. */
async function toolChecks(page: Page, spacing: [number, number], name: string): Promise<Record<string, unknown>> {
  const [rowSp, colSp] = spacing;
  const c = SIZE / 2;
  const px = (mmX: number, mmY: number): [number, number] => [c + mmX / colSp, c + mmY / rowSp];
  const act = (name: string) => page.evaluate((n) => (globalThis as unknown as { evalApi: Api }).evalApi.activate(n), name);
  const out: Record<string, unknown> = {};
  await act('Length');
  await drag(page, px(-40, 50), px(40, 50)); // 80 mm across
  await drag(page, px(50, -30), px(50, 30)); // 60 mm down
  await act('EllipticalROI');
  await drag(page, px(-35, 25), px(-35 + 8, 25 + 8)); // inside the 100 HU disk, centre to corner
  await act('RectangleROI');
  await drag(page, px(-20, -50), px(0, -30)); // brain, 35 HU, 20 x 20 mm
  await act('Probe');
  await drag(page, px(-35, 25), px(-35, 25));
  out.expected = { lengthsMm: [80, 60], ellipse: 'mean 100 SD 4 HU; area 201 mm2 (radii 8 mm)', rectangle: 'mean 35 SD 4 HU, area 400 mm2', probe: '100 +/- noise' };
  out.annotations = await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.annotations());
  out.svgTextsShown = await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.svgTexts());
  await page.screenshot({ path: join(OUT, `${name}-tools.png`) });
  const before = await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.display());
  await act('WindowLevel');
  await drag(page, px(60, 60), px(100, 80));
  out.windowLevel = { before, after: await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.display()) };
  await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.transform());
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(OUT, `${name}-inverted-rotated-flipped.png`) });
  await act('Zoom');
  await drag(page, px(0, 0), px(0, 40));
  out.afterZoom = await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.display());
  out.cineDistinctSlicesIn2sAt20fps = await page.evaluate(() => (globalThis as unknown as { evalApi: Api }).evalApi.cine(20, 2000));
  return out;
}

const report: Record<string, unknown> = {
  date: new Date().toISOString(),
  chromium: browser.version(),
  versions: { core: VERSION, tools: VERSION, vtk: JSON.parse(readFileSync(join(DEPS, 'node_modules', '@kitware', 'vtk.js', 'package.json'), 'utf8')).version },
  bundle,
  miaBundle,
  depsOnDiskMB: Math.round(Number(execFileSync('du', ['-sm', join(DEPS, 'node_modules')]).toString().split('\t')[0])),
};
const square: [number, number] = [0.47, 0.47];
const tall: [number, number] = [0.94, 0.47];
const squareFrames = makeSeries(square);
const tallFrames = makeSeries(tall);
const runs: [string, Buffer[], [number, number], boolean, string, boolean][] = [
  ['miaCanvas', squareFrames, square, false, '?engine=canvas', false],
  ['cornerstoneGpuSwiftShader', squareFrames, square, false, '?engine=cs', true],
  ['cornerstoneCpu', squareFrames, square, false, '?engine=cs&cpu=1', true],
  ['cornerstoneAspect0.94x0.47', tallFrames, tall, false, '?engine=cs', true],
  ['cornerstoneCpuAspect0.94x0.47', tallFrames, tall, false, '?engine=cs&cpu=1', true],
  ['cornerstoneCpuWithoutScaleOverlay', squareFrames, square, false, '?engine=cs&cpu=1&scale=0', true],
  ['miaCanvasAspect0.94x0.47', tallFrames, tall, false, '?engine=canvas', false],
  ['cornerstoneUnderMiaCsp', squareFrames, square, true, '?engine=cs', true],
];
// Three rounds; timings are reported as the median, the first round also checks the tools.
const ROUNDS = 3;
const timings: Record<string, { firstImageMs: number[]; firstPassFps: number[]; cachedFps: number[] }> = {};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
for (let round = 0; round < ROUNDS; round += 1) {
  for (const [name, frames, spacing, csp, query, withTools] of runs) {
    const { server, url } = await serve(frames, spacing, csp);
    try {
      const { page, console, result } = await open(`${url}/${query}`);
      const t = (timings[name] ??= { firstImageMs: [], firstPassFps: [], cachedFps: [] });
      t.firstImageMs.push(Number(result.firstImageMs));
      t.firstPassFps.push(Number((result.scrollFirstPass as { fps?: number } | undefined)?.fps));
      t.cachedFps.push(Number((result.scrollCached as { fps?: number } | undefined)?.fps));
      if (round === 0) {
        const entry: Record<string, unknown> = { ...result, console: console.slice(0, 12), consoleCount: console.length };
        await page.screenshot({ path: join(OUT, `${name}.png`) });
        if (withTools && result.done === true) {
          entry.tools = await toolChecks(page, spacing, name).catch((e: unknown) => `tool checks failed: ${String(e)}`);
        }
        report[name] = entry;
      }
      await page.close();
    } finally {
      server.close();
    }
  }
}
const round1 = (x: number) => Math.round(x * 10) / 10;
report.summary = Object.fromEntries(Object.entries(timings).map(([name, t]) => [name, {
  firstImageMs: round1(median(t.firstImageMs)),
  firstPassFps: round1(median(t.firstPassFps)),
  cachedFps: round1(median(t.cachedFps)),
  runs: t.cachedFps.map(round1).join(' / '),
}]));
await browser.close();
writeFileSync(join(OUT, 'report.json'), JSON.stringify(report, null, 2));
process.stdout.write(`${JSON.stringify(report, null, 2)}\nscreenshots and report.json in ${OUT}\n`);
process.exit(0);
