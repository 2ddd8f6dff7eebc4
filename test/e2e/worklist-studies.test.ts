/**
 * The worklist by study, with triage (issue 11), in Debian's Chromium against the real server:
 * phantom series from phantoms.py, rewritten as two patients' studies (names in Latin-1,
 * accessions, dates, descriptions), imported through the API and analysed by the bundled ONNX
 * model. Study rows show name, ID, accession, date and description and hold their series; the
 * search finds studies by name (accents or not) and by accession; the default order puts the
 * study whose CT shows a haemorrhage first, marked urgent with the finding and slice as the
 * reason; a reader's rejection of it lowers it; sorting by priority turns the order round.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { analyseViaApi } from '../helpers/workstation-seed.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const PHANTOMS = join(ROOT, 'models', 'mia-phantom-detector', 'phantoms.py');
const RETAG = join(ROOT, 'test', 'helpers', 'retag_study.py');
/** phantoms.py's validation range, apart from the other UI suites' seeds. */
const SEED = 30_000_800;
const WAIT = { timeout: 10_000 };

type SeriesSpec = { name: string; seed: number; modality: 'CT' | 'MR'; kinds: string; study: StudySpec; number: number };
type StudySpec = { patient_id: string; patient_name: string; study_uid: string; date: string; description: string; accession: string };

const muellerAcute: StudySpec = { patient_id: 'E2E-A', patient_name: 'MÜLLER^HANS', study_uid: '1.2.826.0.1.3680043.10.1002.1', date: '20260312', description: 'CT head acute', accession: 'ACC-A1' };
const muellerPrior: StudySpec = { patient_id: 'E2E-A', patient_name: 'MÜLLER^HANS', study_uid: '1.2.826.0.1.3680043.10.1002.2', date: '20250110', description: 'MR brain', accession: 'ACC-A0' };
const nilsson: StudySpec = { patient_id: 'E2E-B', patient_name: 'NILSSON^EVA', study_uid: '1.2.826.0.1.3680043.10.1002.3', date: '20260301', description: 'MR brain follow-up', accession: 'XB-77' };

const SERIES: SeriesSpec[] = [
  { name: 'bleed', seed: SEED, modality: 'CT', kinds: 'hemorrhage', study: muellerAcute, number: 1 },
  { name: 'acute-clean', seed: SEED + 10, modality: 'CT', kinds: 'none', study: muellerAcute, number: 2 },
  { name: 'prior-mass', seed: SEED + 20, modality: 'MR', kinds: 'tumor', study: muellerPrior, number: 1 },
  { name: 'follow-mass', seed: SEED + 30, modality: 'MR', kinds: 'tumor', study: nilsson, number: 1 },
  { name: 'follow-clean', seed: SEED + 40, modality: 'MR', kinds: 'none', study: nilsson, number: 2 },
];

let t: TestServer;
let browser: Browser;
let ui: Ui;
const scanIds = new Map<string, string>();

async function importSeries(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mia-e2e-studies-'));
  try {
    for (const spec of SERIES) {
      const out = join(dir, 'series', spec.name);
      const truth = join(dir, `${spec.name}.json`);
      execFileSync('/usr/bin/python3', [PHANTOMS, '--out', out, '--series', '1', '--seed', String(spec.seed), '--truth', truth, '--modality', spec.modality, '--size', '160', '--slices', '16', '--kinds', spec.kinds], { stdio: ['ignore', 'ignore', 'inherit'] });
      // phantoms.py writes one sub-folder per series under --out.
      const [folder] = execFileSync('find', [out, '-name', '*.dcm', '-printf', '%h\\n']).toString().split('\n');
      execFileSync('/usr/bin/python3', [RETAG, folder!, JSON.stringify({ ...spec.study, number: spec.number })]);
      const { series } = JSON.parse(execFileSync('cat', [truth]).toString()) as { series: { scan_uid: string }[] };
      scanIds.set(spec.name, series[0]!.scan_uid);
    }
    const started = await t.request('POST', '/v1/imports', { body: { path: join(dir, 'series') } });
    expect(started.status, started.text).toBe(202);
    for (let until = Date.now() + 60_000; ; ) {
      const status = (await t.request('GET', `/v1/imports/${started.json.data.id}`)).json.data.status as string;
      if (status === 'completed') break;
      if ((status !== 'running' && status !== 'queued') || Date.now() > until) throw new Error(`import ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  await importSeries();
  for (const id of scanIds.values()) expect((await analyseViaApi(t, id)).status).toBe('succeeded');
  browser = await launchBrowser();
  ui = await openUi(browser, t.url, { width: 1600, height: 900 });
  await ui.signIn((await t.keyFor('radiologist', { email: 'worklist-studies@hospital.test' })).key);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const studyRows = () => ui.page.getByTestId('study-row');
const studyRow = (spec: StudySpec) => ui.page.locator(`[data-study-uid="${spec.study_uid}"]`);
const scanRow = (name: string) => ui.page.locator(`[data-scan-id="${scanIds.get(name)}"]`);
const studyOrder = async () => studyRows().evaluateAll((rows) => rows.map((row) => row.getAttribute('data-study-uid')));

describe('worklist by study, with triage', () => {
  it('shows one row per study with name, ID, accession, date and description, its series under it; urgent first', async () => {
    await ui.openWorklist();
    await expect.poll(() => studyRows().count(), WAIT).toBe(3);
    expect(await ui.page.getByTestId('scan-row').count()).toBe(SERIES.length);
    expect(await ui.page.getByTestId('worklist-count').textContent()).toBe('5 of 5 scans');

    const acute = studyRow(muellerAcute);
    // Decoded from Latin-1 (ISO_IR 100) and shown as "FAMILY, Given".
    expect(await acute.getByTestId('study-patient-name').textContent()).toBe('MÜLLER, HANS');
    expect(await acute.getByTestId('study-patient-id').textContent()).toContain('E2E-A');
    expect(await acute.getByTestId('study-accession').textContent()).toBe('ACC-A1');
    expect(await acute.getByTestId('study-date').textContent()).toBe('2026-03-12');
    expect(await acute.getByTestId('study-description').textContent()).toBe('CT head acute');
    expect(await acute.getByTestId('study-modalities').textContent()).toBe('CT');
    expect(await acute.getByTestId('study-series-count').textContent()).toBe('2 series');

    // The haemorrhage makes the acute study urgent and puts it first (the default order).
    expect(await acute.getAttribute('data-priority')).toBe('urgent');
    expect((await studyOrder())[0]).toBe(muellerAcute.study_uid);
    const reason = await acute.getByTestId('triage-reason').textContent();
    expect(reason).toMatch(/^Intracranial haemorrhage \d+%, slice \d+ of 16$/);
    expect(await acute.getByTestId('triage').getAttribute('title')).toBe(`Urgent: ${reason}`);
    expect(await scanRow('bleed').getAttribute('data-priority')).toBe('urgent');
    expect(await scanRow('bleed').getByTestId('triage-reason').textContent()).toBe(reason);
    // The series rows follow their study row, most urgent first.
    const rowsInOrder = await ui.page.locator('[data-testid="study-row"], [data-testid="scan-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-study-uid') ?? r.getAttribute('data-scan-id')));
    expect(rowsInOrder.slice(0, 3)).toEqual([muellerAcute.study_uid, scanIds.get('bleed'), scanIds.get('acute-clean')]);
    // The two mass studies are soon; the clean series routine.
    expect(await studyRow(nilsson).getAttribute('data-priority')).toBe('soon');
    expect(await scanRow('follow-clean').getByTestId('triage').getAttribute('data-priority')).toBe('routine');
    await ui.screenshot('worklist-studies');
  });

  it('searches by name, with or without the accent, and by accession', async () => {
    const search = ui.page.getByTestId('filter-patient');
    await search.fill('muller');
    await expect.poll(() => studyOrder(), WAIT).toEqual([muellerAcute.study_uid, muellerPrior.study_uid]);
    await search.fill('Müller, Hans');
    await expect.poll(() => studyRows().count(), WAIT).toBe(2);
    expect(await ui.page.getByTestId('worklist-count').textContent()).toBe('3 of 5 scans');
    await search.fill('xb-77');
    await expect.poll(() => studyOrder(), WAIT).toEqual([nilsson.study_uid]);
    expect(await ui.page.getByTestId('scan-row').count()).toBe(2);
    await ui.screenshot('worklist-studies-search');
    await search.fill('nobody');
    await expect.poll(() => ui.page.getByText('No scan matches these filters').count(), WAIT).toBe(1);
    await search.fill('');
    await expect.poll(() => studyRows().count(), WAIT).toBe(3);
  });

  it('sorts by priority either way; a study closes and opens its series', async () => {
    const sortPriority = ui.page.getByTestId('sort-priority');
    expect(await sortPriority.getAttribute('aria-sort')).toBe('descending');
    await sortPriority.click();
    expect(await sortPriority.getAttribute('aria-sort')).toBe('ascending');
    await expect.poll(async () => (await studyOrder()).at(-1), WAIT).toBe(muellerAcute.study_uid);
    await sortPriority.click();
    await expect.poll(async () => (await studyOrder())[0], WAIT).toBe(muellerAcute.study_uid);

    await studyRow(muellerAcute).click();
    await expect.poll(() => scanRow('bleed').count(), WAIT).toBe(0);
    expect(await studyRow(muellerAcute).getAttribute('aria-expanded')).toBe('false');
    // Keys move through the series on screen: the first is now the next study's (both left are
    // soon; the newer, Nilsson's, comes first, and in it the series with the mass).
    expect((await studyOrder()).slice(1)).toEqual([nilsson.study_uid, muellerPrior.study_uid]);
    await ui.page.keyboard.press('Enter');
    await ui.page.getByTestId('viewer').waitFor();
    expect(await ui.page.evaluate('window.location.hash')).toBe(`#/scan/${encodeURIComponent(scanIds.get('follow-mass')!)}`);
  });

  it('a reader rejecting the haemorrhage takes the study off the top', async () => {
    const reader = (await t.keyFor('radiologist', { email: 'triage-reject@hospital.test' })).key;
    const result = await t.request('GET', `/v1/scans/${scanIds.get('bleed')}/results`, { headers: { 'API-Version': '1.1' } });
    const bleeds = (result.json.data.findings as { id: string; label: string }[]).filter((f) => f.label === 'hemorrhage_detected');
    expect(bleeds.length).toBeGreaterThan(0);
    for (const finding of bleeds) expect((await t.request('PATCH', `/v1/findings/${finding.id}`, { key: reader, body: { review: 'rejected' } })).status).toBe(200);

    expect((await t.request('GET', `/v1/scans/${scanIds.get('bleed')}`)).json.data.triage).toMatchObject({ priority: 'routine' });
    await ui.openWorklist();
    await expect.poll(() => studyRow(muellerAcute).getAttribute('data-priority'), WAIT).not.toBe('urgent');
    expect(await ui.page.locator('[data-testid="study-row"][data-priority="urgent"]').count()).toBe(0);
    expect((await studyOrder())[0]).not.toBe(muellerAcute.study_uid);
    // The model's top finding still shows, struck through as rejected, so it cannot read as open.
    const summary = ui.page.locator(`[data-scan-id="${scanIds.get('bleed')}"]`).getByTestId('ai-summary');
    await expect.poll(() => summary.textContent(), WAIT).toMatch(/hemorrhage \d+% rejected/);
    expect(await summary.locator('[data-review="rejected"] s').count()).toBe(1);
    await ui.screenshot('worklist-studies-rejected');
  });
});
