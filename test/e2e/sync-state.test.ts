/**
 * The header's sync state (issue 13, Visible state) in Debian's Chromium: a workstation linked to
 * a hub through the fault proxy says it is offline with its pending change and the reason while
 * the hub cannot be reached, and online with nothing pending once "Sync now" got through.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markPushed } from '#server/store/sync-log.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { writeHubLink } from '#server/sync/hub-link.ts';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { PYDICOM_CORPUS, seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { uuid7 } from '#server/sync/uuid7.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const WAIT = { timeout: 10_000 };

let hub: TestServer;
let ws: TestServer;
let proxy: FaultProxy;
let browser: Browser;

beforeAll(async () => {
  ensureRendererBuilt();
  hub = await startTestServer({ hubMode: true, uiDir: UI_DIR });
  ws = await startTestServer({ uiDir: UI_DIR, syncIntervalMs: 0 });
  const enrolled = await enrollDevice(hub.server.services, 'reading room 1', 'test');
  proxy = await startFaultProxy({ host: '127.0.0.1', port: Number(new URL(hub.url).port) });
  writeHubLink(ws.dataDir, { url: proxy.url, key: enrolled.key, device_id: enrolled.device.id, device_name: enrolled.device.name });
  await seedImportedInstance(ws);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await ws?.close();
  await hub?.close();
});

describe('sync state in the header', () => {
  it('shows offline with the pending change and why, then online once a round got through', async () => {
    const ui = await openUi(browser, ws.url);
    await ui.signIn((await ws.keyFor('radiologist')).key);
    const state = ui.page.getByTestId('sync-state');
    await state.waitFor(WAIT);
    expect(await ui.page.getByTestId('sync-pending').textContent()).toBe('1 pending');
    expect(await ui.page.getByTestId('sync-label').textContent()).toBe('Offline');

    proxy.set({ reset: true });
    await ui.page.getByTestId('sync-now').click();
    // Usually at once; Node's fetch now and then leaves a reset connection unsettled, and the
    // client's own 30 s deadline then says so (server/sync/client.ts).
    await ui.page.getByTestId('sync-error').waitFor({ timeout: 45_000 });
    expect(await ui.page.getByTestId('sync-error').textContent()).toMatch(/hub unreachable/);
    expect(await ui.page.getByTestId('sync-pending').textContent()).toBe('1 pending');
    await ui.screenshot('sync-offline');

    proxy.set({});
    await ui.page.getByTestId('sync-now').click();
    await ui.page.getByText('0 pending').waitFor(WAIT);
    expect(await ui.page.getByTestId('sync-label').textContent()).toBe('Online');
    expect(await ui.page.getByTestId('sync-error').count()).toBe(0);
    await ui.screenshot('sync-online');
    // The hub has the instance.
    expect((await hub.request('GET', '/v1/scans')).json.data.items).toHaveLength(1);
  }, 120_000);

  it('lists a change the hub refused on the workstation\'s Admin screen with the reason, and sends it again', async () => {
    const { db, replica } = ws.server.services;
    const own = await db.get<{ change_id: string }>("SELECT change_id FROM sync_changes WHERE device_id = ? AND entity = 'instance' ORDER BY seq LIMIT 1", [replica.deviceId]);
    // As a round marks one whose file no longer matches its digest here.
    await markPushed(db, own!.change_id, 'rejected', `its file in this workstation's archive is damaged: it hashes to ${'0'.repeat(64)}, not ${'f'.repeat(64)}`);
    // A local admin of its own (after a round, the hub's people are this workstation's too).
    const admin = (await ws.keyFor('admin', { email: 'ws-admin@hospital.test' })).key;
    const ui = await openUi(browser, ws.url);
    await ui.signIn(admin);
    await ui.page.getByTestId('sync-refused').waitFor(WAIT);
    await ui.openAdmin();
    const panel = ui.page.getByTestId('refused');
    await panel.waitFor(WAIT);
    const row = panel.locator(`tr[data-change-id="${own!.change_id}"]`);
    await row.waitFor(WAIT);
    expect(await row.getByTestId('refused-reason').textContent()).toMatch(/archive is damaged: it hashes to 0{64}, not f{64}/);
    await panel.scrollIntoViewIfNeeded();
    await ui.screenshot('sync-refused');
    ui.page.once('dialog', (dialog) => void dialog.accept());
    await row.getByTestId('send-again').click();
    await panel.getByText('The hub has taken every change sent from here').waitFor(WAIT);
    const status = (await ws.request('GET', '/v1/sync/status', { key: admin })).json.data as { refused: number; pending: number };
    expect(status).toMatchObject({ refused: 0, pending: 1 });
    const audited = (await ws.request('GET', '/v1/audit?action=sync.refused_send_again', { key: admin })).json.data.items as { target: string }[];
    expect(audited.map((a) => a.target)).toEqual([`change:${own!.change_id}`]);
  }, 120_000);

  it('lists the workstation on the hub with its last contact and clock, enrolls another, and revokes one at once', async () => {
    const ui = await openUi(browser, hub.url);
    await ui.signIn(hub.adminKey);
    await ui.openAdmin();
    const panel = ui.page.getByTestId('devices');
    await panel.waitFor(WAIT);
    const row = panel.locator('tr', { hasText: 'reading room 1' });
    await row.waitFor(WAIT);
    // It synced in the test before: seen, nothing left to pull, its clock (the same manual one) in step.
    expect(await row.getByTestId('device-lag').textContent()).toBe('0');
    expect(await row.getByTestId('device-clock').textContent()).toMatch(/in step|ms (ahead|behind)/);

    await ui.page.getByTestId('device-name').fill('reading room 2');
    await ui.page.getByTestId('enroll-device').click();
    await ui.page.getByTestId('new-key').waitFor(WAIT);
    expect(await ui.page.getByTestId('new-key').textContent()).toMatch(/^mia_/);
    await panel.locator('tr', { hasText: 'reading room 2' }).waitFor(WAIT);

    ui.page.once('dialog', (dialog) => void dialog.accept());
    await row.getByTestId('revoke-device').click();
    await row.getByText(/^revoked/).waitFor(WAIT);
    await ui.screenshot('hub-devices');
    // The workstation's next round is refused at once.
    const status = (await ws.request('POST', '/v1/sync/run', { key: (await ws.keyFor('radiologist')).key })).json.data;
    expect(status.last_error).toMatch(/401 .*device was revoked/);
  }, 120_000);

  it('shows a verdict readers disagreed on as disputed in the viewer, and the reader\'s own verdict settles it', async () => {
    const seeded = await seedImportedInstance(hub, `${PYDICOM_CORPUS}/MR_small.dcm`);
    const scanRow = (await hub.server.services.db.get('SELECT s.id AS scanRef, p.patient_id AS patientId, st.study_uid AS studyUid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [seeded.scanId])) as { scanRef: number; patientId: string; studyUid: string };
    await seedAnalysis(hub.server.services.db, { scanId: seeded.scanId, ...scanRow }, [{ instanceUid: seeded.instanceUid, frame: 0, confidence: 0.9, x: 10, y: 10, width: 20, height: 20 }]);
    const resultOf = async () => (await hub.request('GET', `/v1/scans/${seeded.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as { id: string; review: string | null; review_disputed?: boolean }[];
    const findingId = (await resultOf())[0]!.id;

    // Two readers, apart: neither had seen the other's verdict (no supersedes); they disagree.
    const enrolled = await enrollDevice(hub.server.services, 'reading room 3', 'test');
    const device = { id: enrolled.device.id, key: enrolled.key };
    const reader = await hub.keyFor('radiologist', { email: 'disputing@hospital.test' });
    const now = hub.server.services.clock.now().getTime();
    const event = (ms: number, verdict: string) => ({
      change_id: uuid7(ms),
      entity: 'review',
      key: uuid7(ms),
      op: 'put',
      hlc: `${String(ms).padStart(15, '0')}-0000-${device.id}`,
      user_id: reader.userId,
      payload: { finding_id: findingId, verdict, reason: null, supersedes: [], created_at: new Date(ms).toISOString() },
    });
    const pushed = await fetch(`${hub.url}/v1/sync/push`, {
      method: 'POST',
      headers: { authorization: `Bearer ${device.key}`, 'mia-sync-protocol': '1', 'idempotency-key': `disputed-${now}`, 'content-type': 'application/json' },
      body: JSON.stringify({ changes: [event(now - 2000, 'accepted'), event(now - 1000, 'rejected')] }),
    });
    const answer = (await pushed.json()) as { data: { accepted: number } };
    expect(answer.data.accepted, JSON.stringify(answer)).toBe(2);
    expect((await resultOf())[0]).toMatchObject({ review: 'rejected', review_disputed: true });

    const ui = await openUi(browser, hub.url);
    await ui.signIn(reader.key);
    await ui.openScan(seeded.scanId);
    const row = ui.page.locator(`[data-finding-id="${findingId}"]`);
    await row.getByTestId('finding-disputed').waitFor(WAIT);
    await ui.screenshot('verdict-disputed');
    // Accepting (the verdict not shown) settles it: one verdict that has seen both.
    await row.getByTestId('accept-finding').click();
    await expect.poll(() => row.getByTestId('finding-disputed').count(), WAIT).toBe(0);
    const settled = (await resultOf())[0]!;
    expect(settled.review).toBe('accepted');
    expect(settled.review_disputed).toBeUndefined();
  }, 120_000);

  it('lists a change the hub kept for an admin, who discards it; it leaves the list', async () => {
    const findingId = ((await hub.server.services.db.get("SELECT public_id FROM findings WHERE source = 'model' LIMIT 1")) as { public_id: string }).public_id;
    const leaving = await hub.keyFor('radiologist', { email: 'leaving@hospital.test' });
    expect((await hub.request('PATCH', `/v1/users/${leaving.userId}`, { body: { status: 'disabled' } })).status).toBe(200);
    const enrolled = await enrollDevice(hub.server.services, 'reading room 4', 'test');
    const ms = hub.server.services.clock.now().getTime() + 1000;
    const pushed = await fetch(`${hub.url}/v1/sync/push`, {
      method: 'POST',
      headers: { authorization: `Bearer ${enrolled.key}`, 'mia-sync-protocol': '1', 'idempotency-key': `late-${ms}`, 'content-type': 'application/json' },
      body: JSON.stringify({ changes: [{ change_id: uuid7(ms), entity: 'review', key: uuid7(ms), op: 'put', hlc: `${String(ms).padStart(15, '0')}-0000-${enrolled.device.id}`, user_id: leaving.userId, payload: { finding_id: findingId, verdict: 'accepted', reason: null, supersedes: [], created_at: new Date(ms).toISOString() } }] }),
    });
    const answer = (await pushed.json()) as { data: { results: { reason?: string }[] } };
    expect(answer.data.results[0]!.reason).toMatch(/^quarantined for an admin: user .* was disabled on the hub/);

    const ui = await openUi(browser, hub.url);
    await ui.signIn(hub.adminKey);
    await ui.openAdmin();
    const panel = ui.page.getByTestId('quarantine');
    await panel.waitFor(WAIT);
    const row = panel.locator('tr', { hasText: 'Verdict' });
    await row.waitFor(WAIT);
    expect(await row.getByTestId('quarantine-reason').textContent()).toMatch(/was disabled on the hub at .*, before this change was made/);
    await ui.screenshot('quarantine');
    ui.page.once('dialog', (dialog) => void dialog.accept());
    await row.getByTestId('discard-change').click();
    await panel.getByText('Nothing waits for a decision').waitFor(WAIT);
    const decided = (await hub.request('GET', '/v1/sync/quarantine?resolved=true')).json.data.items as { resolution: string; resolved_by: string }[];
    expect(decided).toEqual([expect.objectContaining({ resolution: 'discarded' })]);
  }, 120_000);
});
