/**
 * Reading that a radiologist can trust (issue 11), in Debian's Chromium against the real server
 * and the built renderer, on real DICOM files derived from pydicom's corpus and put into the
 * archive through the importer's commit code:
 * - a radiologist key with only the role's default scopes reviews, and the help lists only
 *   what the key can do;
 * - Accept/Reject act only on a finding whose box is on screen (not below the threshold, not on
 *   another slice), as the review keys do;
 * - non-square pixels (Pixel Spacing 0.94\0.47, or Imager Pixel Spacing on a radiograph) are
 *   drawn by physical aspect, and finding boxes follow (checked in screenshot pixels).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { pixelAt, readPng, type Png } from '../helpers/png.ts';
import { PYDICOM_CORPUS, seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis, type SeededScan } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { analyseViaApi } from '../helpers/workstation-seed.ts';

type Finding = { id: string; confidence: number; instance_uid: string; frame: number; review: string | null };

const WAIT = { timeout: 10_000 };

/**
 * Writes `count` slices of one new series from a corpus file with pydicom (new UIDs, instance
 * numbers and positions along z), each edited by `assignments` (Python statements on `ds`).
 */
function writeSeries(dir: string, source: string, count: number, assignments = ''): string[] {
  const script = `
import sys, pydicom
from pydicom.uid import generate_uid
src, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
series = generate_uid()
for i in range(count):
    ds = pydicom.dcmread(src)
    ds.SeriesInstanceUID = series
    ds.SOPInstanceUID = generate_uid()
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ds.InstanceNumber = i + 1
    ds.ImagePositionPatient = [0, 0, float(i * 5)]
    ds.SliceLocation = float(i * 5)
${assignments
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => `    ${line.trim()}`)
  .join('\n')}
    ds.save_as(f"{out}/{i:03d}.dcm", write_like_original=False)
`;
  execFileSync('/usr/bin/python3', ['-c', script, source, dir, String(count)], { stdio: ['ignore', 'ignore', 'inherit'] });
  return readdirSync(dir)
    .filter((name) => name.endsWith('.dcm'))
    .sort()
    .map((name) => join(dir, name));
}

/** Imports the files and returns the scan with its slices in the viewer's order. */
async function importSeries(t: TestServer, files: readonly string[]): Promise<{ scan: SeededScan; instanceUids: string[] }> {
  let scanId = '';
  for (const file of files) scanId = (await seedImportedInstance(t, file)).scanId;
  const row = (await t.server.services.db.get('SELECT s.id AS scanRef, p.patient_id AS patientId, st.study_uid AS studyUid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scanId])) as { scanRef: number; patientId: string; studyUid: string };
  const instances = (await t.request('GET', `/v1/scans/${scanId}/instances?limit=500`)).json.data.items as { instance_uid: string }[];
  return { scan: { scanId, ...row }, instanceUids: instances.map((i) => i.instance_uid) };
}

/** Sets a range input the way a drag does, so React sees the change. */
async function setRange(ui: Ui, testId: string, value: number): Promise<void> {
  // A string expression: the test project has no DOM types.
  await ui.page.evaluate(`(() => {
    const input = document.querySelector('[data-testid="${testId}"]');
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
    setter.call(input, '${value}');
    input.dispatchEvent(new Event('input', { bubbles: true }));
  })()`);
}

let t: TestServer;
let browser: Browser;
let work: string;

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  work = mkdtempSync(join(tmpdir(), 'mia-reading-trust-'));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('review only what is on screen', () => {
  let ui: Ui;
  let scanId = '';
  let onSix: Finding;
  let onNineteen: Finding;
  const resultOf = async () => (await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as Finding[];
  const row = (finding: Finding) => ui.page.locator(`[data-finding-id="${finding.id}"]`);

  beforeAll(async () => {
    const dir = join(work, 'stack');
    execFileSync('mkdir', ['-p', dir]);
    const { scan, instanceUids } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'MR_small.dcm'), 20, 'ds.StudyDate = "1997.04.24"'));
    scanId = scan.scanId;
    await seedAnalysis(t.server.services.db, scan, [
      { confidence: 0.9, instanceUid: instanceUids[5]!, x: 10, y: 12, width: 20, height: 16 },
      { confidence: 0.49, instanceUid: instanceUids[18]!, x: 30, y: 30, width: 14, height: 12 },
    ]);
    const findings = await resultOf();
    onSix = findings.find((f) => f.confidence === 0.9)!;
    onNineteen = findings.find((f) => f.confidence === 0.49)!;
  });

  it('a radiologist key with the default scopes may review; the help names review keys but not analyse', async () => {
    ui = await openUi(browser, t.url);
    await ui.signIn((await t.keyFor('radiologist', { email: 'reader@hospital.test' })).key);
    await ui.openScan(scanId);
    await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'), WAIT).toBe('5');
    const help = (await ui.page.getByTestId('kbd-help').textContent()) ?? '';
    expect(help).toContain('a accept');
    expect(help).toContain('r reject');
    // Analysing needs write:scans, which the role does not hold by default.
    expect(help).not.toContain('analyse');
    expect(await ui.page.getByText('needs the write:reports scope').count()).toBe(0);
    // An ACR-NEMA style date (YYYY.MM.DD) reads like any other, not raw.
    expect(await ui.page.locator('.viewer-bar').textContent()).toContain('1997-04-24');
    await expect.poll(() => row(onSix).getByTestId('accept-finding').isEnabled()).toBe(true);
  });

  it('a finding on another slice cannot be accepted from its button; the tooltip says why', async () => {
    const accept = row(onNineteen).getByTestId('accept-finding');
    expect(await accept.isDisabled()).toBe(true);
    expect(await accept.getAttribute('title')).toBe('On slice 19, not the slice shown (6): click the finding to go to its slice first.');
    await accept.click({ force: true });
    await row(onNineteen).getByTestId('reject-finding').click({ force: true });
    await ui.screenshot('review-guard-other-slice');
    // Let any request the click might have sent land before asking the server.
    await ui.page.waitForTimeout(300);
    expect((await resultOf()).find((f) => f.id === onNineteen.id)!.review).toBeNull();
  });

  it('a finding below the threshold cannot be reviewed on its own slice either, until the threshold is lowered', async () => {
    await setRange(ui, 'threshold', 0.5);
    await row(onNineteen).click();
    await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'), WAIT).toBe('18');
    const accept = row(onNineteen).getByTestId('accept-finding');
    expect(await accept.isDisabled()).toBe(true);
    expect(await row(onNineteen).getByTestId('review-blocked').textContent()).toBe('Below the 50% threshold, so its box is hidden: lower the threshold to review it.');
    // The finding on slice 6 is visible but on another slice now.
    expect(await row(onSix).getByTestId('accept-finding').isDisabled()).toBe(true);
    await ui.screenshot('review-guard-below-threshold');
    await accept.click({ force: true });
    await ui.page.waitForTimeout(300);
    expect((await resultOf()).find((f) => f.id === onNineteen.id)!.review).toBeNull();

    await setRange(ui, 'threshold', 0.4);
    await expect.poll(() => accept.isEnabled()).toBe(true);
    expect(await row(onNineteen).getByTestId('review-blocked').count()).toBe(0);
    await accept.click();
    await expect.poll(() => row(onNineteen).getAttribute('data-review'), WAIT).toBe('accepted');
    expect((await resultOf()).find((f) => f.id === onNineteen.id)!.review).toBe('accepted');
    await ui.screenshot('review-guard-accepted');
  });

  it('a key without write:reports sees no review keys in the help', async () => {
    const engineer = await openUi(browser, t.url);
    await engineer.signIn((await t.keyFor('data_engineer', { email: 'engineer@hospital.test' })).key);
    await engineer.openScan(scanId);
    await engineer.page.getByTestId('kbd-help').waitFor();
    const help = (await engineer.page.getByTestId('kbd-help').textContent()) ?? '';
    expect(help).not.toContain('accept');
    expect(help).not.toContain('analyse');
    expect(await engineer.page.getByTestId('accept-finding').count()).toBe(0);
    await engineer.page.context().close();
  });
});

/** Lengths of the runs of pixels matching `hit` along a line of the screenshot, in order. */
function runs(png: Png, from: { x: number; y: number }, step: { x: number; y: number }, count: number, hit: (rgb: number[]) => boolean): { start: number; length: number }[] {
  const found: { start: number; length: number }[] = [];
  let current: { start: number; length: number } | null = null;
  for (let i = 0; i < count; i += 1) {
    const rgb = pixelAt(png, Math.round(from.x + step.x * i), Math.round(from.y + step.y * i));
    if (hit(rgb)) {
      current ??= { start: i, length: 0 };
      current.length += 1;
    } else if (current) {
      found.push(current);
      current = null;
    }
  }
  if (current) found.push(current);
  return found;
}

const isBoxColour = ([r, g, b]: number[]) => (r! > 200 && g! > 170 && b! < 90) || (r! < 90 && g! > 180 && b! > 200);

describe('non-square pixels are drawn by physical aspect', () => {
  let ui: Ui;

  /**
   * CT_small (128 x 128) made uniformly bright under its window (one black pixel in the corner),
   * with pixel spacing 0.94 mm between rows and 0.47 mm between columns: a 60 x 120 mm image, to
   * be drawn twice as tall as wide. `tag` names the spacing attribute: Pixel Spacing, or only
   * Imager Pixel Spacing on a DX radiograph.
   */
  async function nonSquare(name: string, tag: 'PixelSpacing' | 'ImagerPixelSpacing'): Promise<{ scanId: string; finding: Finding & { location: { x: number; y: number; width: number; height: number } } }> {
    const dir = join(work, name);
    execFileSync('mkdir', ['-p', dir]);
    const edits = [
      'import struct',
      'del ds.PixelSpacing',
      `ds.${tag} = [0.94, 0.47]`,
      ...(tag === 'ImagerPixelSpacing' ? ['ds.Modality = "DX"'] : []),
      // 1074 - 1024 = 50 HU, white under the file's own window (a flat frame would be drawn black).
      'ds.PixelData = struct.pack("<h", 0) + struct.pack("<h", 1074) * (128 * 128 - 1)',
      'ds.WindowCenter = -100',
      'ds.WindowWidth = 100',
    ].join('\n');
    const { scan, instanceUids } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'CT_small.dcm'), 1, edits));
    // A square box in image pixels: 15 mm wide, 30 mm tall.
    await seedAnalysis(t.server.services.db, scan, [{ confidence: 0.9, instanceUid: instanceUids[0]!, x: 48, y: 40, width: 32, height: 32 }]);
    const findings = (await t.request('GET', `/v1/scans/${scan.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings;
    return { scanId: scan.scanId, finding: findings[0] };
  }

  it.each([
    ['Pixel Spacing 0.94\\0.47', 'ps', 'PixelSpacing'],
    ['only Imager Pixel Spacing 0.94\\0.47 (DX)', 'ips', 'ImagerPixelSpacing'],
  ] as const)('%s: the instance API gives the spacing, the image and its box are drawn twice as tall as wide', async (_title, name, tag) => {
    const { scanId, finding } = await nonSquare(name, tag);
    const instances = (await t.request('GET', `/v1/scans/${scanId}/instances`)).json.data.items as { pixel_spacing: number[] | null }[];
    expect(instances[0]!.pixel_spacing).toEqual([0.94, 0.47]);

    ui ??= await openUi(browser, t.url);
    if (!(await ui.page.getByTestId('nav-worklist').count())) await ui.signIn((await t.keyFor('radiologist', { email: 'aspect@hospital.test' })).key);
    await ui.openScan(scanId);
    const canvas = ui.page.getByTestId('viewport-canvas');
    await expect.poll(() => canvas.getAttribute('data-rendered-slice'), WAIT).toBe('0');
    const box = (await canvas.boundingBox())!;
    const png = readPng(await ui.screenshot(`aspect-${name}`));

    const scale = Number(await canvas.getAttribute('data-scale'));
    const scaleY = Number(await canvas.getAttribute('data-scale-y'));
    const offsetX = Number(await canvas.getAttribute('data-offset-x'));
    const offsetY = Number(await canvas.getAttribute('data-offset-y'));
    expect(scaleY / scale).toBeCloseTo(2, 5);

    // The drawn image: the bright run along image row 100 (below the box) and down image
    // column 124 (right of it, clear of the tool buttons and markers over the image's top
    // middle), measured in screenshot pixels over the whole canvas.
    const bright = ([r, g, b]: number[]) => r! > 100 && g! > 100 && b! > 100;
    const longest = (found: { length: number }[]) => Math.max(0, ...found.map((r) => r.length));
    const width = longest(runs(png, { x: box.x, y: box.y + offsetY + 100 * scaleY }, { x: 1, y: 0 }, Math.floor(box.width), bright));
    const height = longest(runs(png, { x: box.x + offsetX + 124 * scale, y: box.y }, { x: 0, y: 1 }, Math.floor(box.height), bright));
    expect(width).toBeGreaterThan(100);
    // The whole image is in the canvas (fit), not cropped.
    expect(height).toBeLessThanOrEqual(Math.ceil(box.height));
    expect(height / width, `drawn ${width} x ${height} px`).toBeGreaterThan(1.96);
    expect(height / width).toBeLessThan(2.04);

    // The box (32 x 32 image pixels) follows: its edges are twice as far apart down as across.
    const { location } = finding;
    const midX = box.x + offsetX + (location.x + location.width / 2) * scale;
    const midY = box.y + offsetY + (location.y + location.height / 2) * scaleY;
    const across = runs(png, { x: midX - 200, y: midY }, { x: 1, y: 0 }, 400, isBoxColour);
    // Down from just above the top edge: the label above the box is drawn in the box's colour.
    const halfHeight = (location.height / 2) * scaleY;
    const down = runs(png, { x: midX, y: midY - halfHeight - 2 }, { x: 0, y: 1 }, Math.round(2 * halfHeight + 8), isBoxColour);
    // Two edges each way; the distance between them is the box's drawn size.
    expect(across.length, JSON.stringify(across)).toBe(2);
    expect(down.length, JSON.stringify(down)).toBe(2);
    const drawnWidth = across[1]!.start - across[0]!.start;
    const drawnHeight = down[1]!.start - down[0]!.start;
    expect(Math.abs(drawnWidth - 32 * scale)).toBeLessThan(3);
    expect(drawnHeight / drawnWidth, `box ${drawnWidth} x ${drawnHeight} px`).toBeGreaterThan(1.9);
    expect(drawnHeight / drawnWidth).toBeLessThan(2.1);

    // The worklist thumbnail keeps the aspect too (the server scales it, the row fits it).
    await ui.openWorklist();
    // A string expression: the test project has no DOM types.
    const natural = `(() => { const img = document.querySelector('[data-scan-id="${scanId}"] .thumb img'); return img && img.complete && img.naturalWidth > 0 ? [img.naturalWidth, img.naturalHeight] : null; })()`;
    await expect.poll(() => ui.page.evaluate(natural), WAIT).toEqual([64, 128]);
    await ui.screenshot(`aspect-${name}-worklist`);
  });
});

describe('a flat frame', () => {
  it('is drawn black, not white (window 1 / level 0 made an all-zero frame white)', async () => {
    const dir = join(work, 'all-zero');
    execFileSync('mkdir', ['-p', dir]);
    const { scan } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'MR_small.dcm'), 1, 'ds.PixelData = bytes(64 * 64 * 2)\ndel ds.WindowCenter\ndel ds.WindowWidth'));
    const ui = await openUi(browser, t.url);
    await ui.signIn((await t.keyFor('radiologist', { email: 'all-zero@hospital.test' })).key);
    await ui.openScan(scan.scanId);
    const canvas = ui.page.getByTestId('viewport-canvas');
    await expect.poll(() => canvas.getAttribute('data-rendered-slice'), WAIT).toBe('0');
    const box = (await canvas.boundingBox())!;
    const png = readPng(await ui.screenshot('all-zero-frame'));
    // No window in the file: the automatic one. The image fills the canvas height around its
    // centre, and every pixel there must be black.
    for (const dy of [-100, 0, 100]) {
      const rgb = pixelAt(png, Math.round(box.x + box.width / 2), Math.round(box.y + box.height / 2 + dy));
      expect(Math.max(...rgb), `pixel ${rgb.join(',')}`).toBeLessThan(16);
    }
    await ui.page.context().close();
  });
});

describe('a frame that cannot be decoded', () => {
  it('says why and offers no Retry, since asking again gets the same answer', async () => {
    const dir = join(work, 'undecodable');
    execFileSync('mkdir', ['-p', dir]);
    // An RLE frame whose header declares no segments: it parses, but no decoder can read it.
    const edits = ['from pydicom.encaps import encapsulate', 'ds.PixelData = encapsulate([bytes(64) + bytes(64)])'].join('\n');
    const { scan, instanceUids } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'MR_small_RLE.dcm'), 1, edits));
    const raw = await t.request('GET', `/v1/instances/${instanceUids[0]}/frames/0/raw`, { headers: { Accept: '*/*' } });
    expect(raw.status).toBe(422);

    const ui = await openUi(browser, t.url);
    await ui.signIn((await t.keyFor('radiologist', { email: 'undecodable@hospital.test' })).key);
    await ui.openScan(scan.scanId);
    const problem = ui.page.locator('.state-error');
    await problem.waitFor(WAIT);
    expect(await problem.textContent()).toContain('Cannot decode this frame');
    expect(await problem.textContent()).toContain('Retrying will not change this');
    expect(await problem.getByRole('button', { name: 'Retry' }).count()).toBe(0);
    await ui.screenshot('undecodable-frame');
    await ui.page.context().close();
  });
});

describe('after a not-applicable analysis', () => {
  it('the viewer gives the reason, not "press Analyse"', async () => {
    const dir = join(work, 'one-slice');
    execFileSync('mkdir', ['-p', dir]);
    const { scan } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'MR_small.dcm'), 1));
    const job = await analyseViaApi(t, scan.scanId);
    expect(job.status).toBe('not_applicable');

    const ui = await openUi(browser, t.url);
    await ui.signIn((await t.keyFor('radiologist', { email: 'not-applicable@hospital.test', scopes: ['write:scans'] })).key);
    await ui.openScan(scan.scanId);
    const text = (await ui.page.getByTestId('no-result').textContent()) ?? '';
    expect(text).toMatch(/^No AI result: not analysed by mia phantom detector: .*slice/);
    expect(text).not.toContain('press Analyse');
    await ui.screenshot('not-applicable-viewer');
    await ui.page.context().close();
  });
});

describe('the viewer toolbar', () => {
  it('stays on one row at 1600 px with the five CT presets and a long description', async () => {
    const dir = join(work, 'toolbar');
    execFileSync('mkdir', ['-p', dir]);
    const { scan } = await importSeries(t, writeSeries(dir, join(PYDICOM_CORPUS, 'CT_small.dcm'), 1, 'ds.SeriesDescription = "AX BRAIN WITHOUT CONTRAST 5MM STANDARD KERNEL RECON 2"'));
    const ui = await openUi(browser, t.url, { width: 1600, height: 900 });
    await ui.signIn((await t.keyFor('radiologist', { email: 'toolbar@hospital.test' })).key);
    await ui.openScan(scan.scanId);
    await ui.page.getByRole('button', { name: 'Soft tissue' }).waitFor();
    // A string expression: the test project has no DOM types.
    const tops = (await ui.page.evaluate(`[...document.querySelector('.viewer-bar').children].filter((el) => el.getBoundingClientRect().height > 0).map((el) => Math.round(el.getBoundingClientRect().top + el.getBoundingClientRect().height / 2))`)) as number[];
    await ui.screenshot('toolbar-1600');
    expect(new Set(tops).size, `row centres ${tops.join(', ')}`).toBe(1);
    expect(await ui.page.locator('.viewer-bar strong').getAttribute('title')).toContain('AX BRAIN WITHOUT CONTRAST 5MM STANDARD KERNEL RECON 2');
    await ui.page.context().close();
  });
});
