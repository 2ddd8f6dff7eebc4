/**
 * Issue 11, item 4 in Debian's Chromium: a reported scan's findings offer no Accept/Reject but
 * point to the report; the final report shows what its recommendation was built from (the
 * accepted tumour, not the rejected infarct), and a reader adds a signed addendum that changes
 * a verdict and is shown with its author and time.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { uuid7 } from '#server/sync/uuid7.ts';

let t: TestServer;
let browser: Browser;
const WAIT = { timeout: 10_000 };

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('addenda in the workstation', () => {
  it('points a reported scan\'s verdicts to the report, where an addendum is added and shown', async () => {
    // A real CT image (pydicom's CT_small) with a tumour and an infarct on it.
    const image = await seedImportedInstance(t);
    const { db } = t.server.services;
    const row = (await db.get('SELECT s.id, p.patient_id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [image.scanId])) as {
      id: number;
      patient_id: string;
      study_uid: string;
    };
    const scan = { scanId: image.scanId, patientId: row.patient_id, studyUid: row.study_uid, scanRef: row.id };
    const place = { instanceUid: image.instanceUid, frame: 0, width: 20, height: 20 };
    await seedAnalysis(db, scan, [
      { ...place, label: 'tumor_detected', confidence: 0.9, x: 20, y: 20 },
      { ...place, label: 'infarct_detected', confidence: 0.8, x: 60, y: 60 },
    ]);
    const reader = await t.keyFor('radiologist', { email: 'dr.reader@hospital.test' });
    const findings = (await t.request('GET', `/v1/scans/${scan.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as Array<{ id: string; label: string }>;
    const tumour = findings.find((f) => f.label === 'tumor_detected')!.id;
    const infarct = findings.find((f) => f.label === 'infarct_detected')!.id;
    await t.request('PATCH', `/v1/findings/${tumour}`, { key: reader.key, body: { review: 'accepted' } });
    await t.request('PATCH', `/v1/findings/${infarct}`, { key: reader.key, body: { review: 'rejected' } });
    const report = (await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: scan.scanId } })).json.data;
    expect((await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { status: 'final' } })).status).toBe(200);

    const ui = await openUi(browser, t.url);
    await ui.signIn(reader.key);
    await ui.openScan(scan.scanId);
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(2);
    // No Accept/Reject on a reported scan; the reader is sent to the addendum instead.
    expect(await ui.page.getByTestId('accept-finding').count()).toBe(0);
    expect(await ui.page.getByTestId('reject-finding').count()).toBe(0);
    expect(await ui.page.getByTestId('review-locked').textContent()).toMatch(/final report locks these verdicts.*addendum/);
    await ui.screenshot('viewer-reported-locked');
    await ui.page.getByTestId('open-addendum').click();
    await ui.page.getByTestId('report-final').waitFor();

    // The signed recommendation follows the verdicts: the tumour, not the rejected infarct.
    expect(await ui.page.getByTestId('recommendation-basis').getAttribute('data-basis')).toBe('verdicts');
    const recommendation = await ui.page.getByTestId('recommendation').inputValue();
    expect(recommendation).toMatch(/tumour \(accepted on review\)/i);
    expect(recommendation).not.toMatch(/infarct|diffusion/i);
    expect(await ui.page.getByTestId('addendum').count()).toBe(0);

    await ui.page.getByTestId('addendum-input').fill('Second look with the diffusion series: the infarct is real.\nStroke team informed.');
    // The report's findings, in snapshot order: pick the infarct's row.
    const rows = ui.page.getByTestId('addenda').locator('tr');
    const infarctRow = rows.filter({ hasText: 'infarct' });
    await infarctRow.getByTestId('addendum-verdict').selectOption('accepted');
    await ui.page.getByTestId('add-addendum').click();
    await expect.poll(() => ui.page.getByTestId('addendum').count(), WAIT).toBe(1);
    const shown = ui.page.getByTestId('addendum').first();
    expect(await shown.getByTestId('addendum-text').textContent()).toBe('Second look with the diffusion series: the infarct is real.\nStroke team informed.');
    expect(await shown.getByTestId('addendum-author').textContent()).toBe('dr.reader@hospital.test');
    expect(await shown.getByTestId('addendum-time').textContent()).not.toBe('');
    expect(await shown.getByTestId('addendum-change').textContent()).toBe('infarct: rejected → accepted');
    expect(await ui.page.getByTestId('addendum-input').inputValue()).toBe('');
    await expect.poll(() => infarctRow.locator('td').nth(2).textContent(), WAIT).toBe('now accepted');
    await ui.screenshot('report-addendum');

    // Stored as the server's record: author, time, the verdict change, the finding's verdict now.
    const stored = (await t.request('GET', `/v1/reports/${report.id}`, { key: reader.key })).json.data;
    expect(stored.addenda).toEqual([
      expect.objectContaining({
        author: { id: reader.userId, email: 'dr.reader@hospital.test' },
        created_at: t.clock.now().toISOString(),
        finding_changes: [{ finding_id: infarct, label: 'infarct_detected', from: 'rejected', to: 'accepted' }],
      }),
    ]);
    const result = (await t.request('GET', `/v1/scans/${scan.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data;
    expect(result.findings.find((f: { id: string }) => f.id === infarct).review).toBe('accepted');
  }, 60_000);

  it('shows an edit that reached the signed report from another workstation as a conflict, which the reader turns into an addendum', async () => {
    const hub = await startTestServer({ uiDir: UI_DIR, hubMode: true });
    try {
      const image = await seedImportedInstance(hub);
      const { db } = hub.server.services;
      const row = (await db.get('SELECT s.id, p.patient_id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [image.scanId])) as { id: number; patient_id: string; study_uid: string };
      await seedAnalysis(db, { scanId: image.scanId, patientId: row.patient_id, studyUid: row.study_uid, scanRef: row.id }, [{ instanceUid: image.instanceUid, frame: 0, label: 'tumor_detected', confidence: 0.9, x: 20, y: 20, width: 20, height: 20 }]);
      const reader = await hub.keyFor('radiologist', { email: 'dr.signer@hospital.test' });
      const report = (await hub.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: image.scanId, impression: 'Signed words.' } })).json.data;
      expect((await hub.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { status: 'final' } })).status).toBe(200);

      // Reading room 2 had the draft offline and rewrote the impression after it was signed here.
      const room = await enrollDevice(hub.server.services, 'reading room 2', 'test');
      const ms = hub.server.services.clock.now().getTime() + 5000;
      const pushed = await fetch(`${hub.url}/v1/sync/push`, {
        method: 'POST',
        headers: { authorization: `Bearer ${room.key}`, 'mia-sync-protocol': '1', 'idempotency-key': `late-edit-${ms}`, 'content-type': 'application/json' },
        body: JSON.stringify({ changes: [{
          change_id: uuid7(ms), entity: 'report', key: report.id, op: 'put', hlc: `${String(ms).padStart(15, '0')}-0000-${room.device.id}`, user_id: reader.userId,
          payload: { scan_id: image.scanId, analysis_id: report.analysis.id, author_id: report.author.id, created_at: report.created_at, fields: { impression: 'A late thought from room 2.' }, final: null },
        }] }),
      });
      expect(((await pushed.json()) as { data: { accepted: number } }).data.accepted).toBe(1);
      const stored = (await hub.request('GET', `/v1/reports/${report.id}`, { key: reader.key })).json.data;
      expect(stored).toMatchObject({ status: 'final', impression: 'Signed words.' });
      expect(stored.conflicts).toEqual([expect.objectContaining({ field: 'impression', value: 'A late thought from room 2.', user_id: reader.userId })]);

      const ui = await openUi(browser, hub.url);
      await ui.signIn(reader.key);
      await ui.openScan(image.scanId);
      await ui.page.getByTestId('open-addendum').click();
      await ui.page.getByTestId('report-final').waitFor();
      const conflict = ui.page.getByTestId('report-conflict');
      await conflict.waitFor(WAIT);
      expect(await conflict.textContent()).toContain('A late thought from room 2.');
      expect(await conflict.textContent()).toContain('dr.signer@hospital.test');
      await ui.screenshot('report-conflict');
      await conflict.getByTestId('conflict-to-addendum').click();
      expect(await ui.page.getByTestId('addendum-input').inputValue()).toBe('Impression (edit made while the report was being signed):\nA late thought from room 2.');
      await ui.page.getByTestId('add-addendum').click();
      await expect.poll(() => ui.page.getByTestId('addendum').count(), WAIT).toBe(1);
      // The signed words are unchanged; the late thought is now signed too, as an addendum.
      const after = (await hub.request('GET', `/v1/reports/${report.id}`, { key: reader.key })).json.data;
      expect(after.impression).toBe('Signed words.');
      expect(after.addenda[0].text).toContain('A late thought from room 2.');
      // The page's open connections would hold the server's close.
      await ui.page.context().close();
    } finally {
      await hub.close();
    }
  }, 60_000);
});
