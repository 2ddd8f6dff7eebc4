/**
 * What a hub tells a workstation of its assigned studies (GET /v1/sync/assigned, asked every sync
 * round): every file of them the first time, then only that nothing changed for as long as the
 * assignments and their studies' files stay as they were; a new file or a new assignment sends
 * the list again.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '#server/store/database.ts';
import { insertInstance } from '#server/store/archive-index.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { instanceInput, seedScan, uid, type SeededScan } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let key: string;
let deviceId: string;

beforeAll(async () => {
  t = await startTestServer({ hubMode: true });
  const enrolled = await enrollDevice(t.server.services, 'assigned', 'test');
  key = enrolled.key;
  deviceId = enrolled.device.id;
});
afterAll(async () => {
  await t.close();
});

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

async function addInstance(scan: SeededScan, n: number): Promise<string> {
  const file = sha(`${scan.scanId}/${n}`);
  await inTransaction(t.server.services.db, async (tx) => {
    await insertInstance(tx, scan.scanRef, instanceInput({ sopInstanceUid: uid(), instanceNumber: n, position: n, filePath: `aa/${file}.dcm`, fileSha256: file, fileSize: 1000 + n }), '2026-03-01T08:00:00.000Z');
  });
  return file;
}

type Assigned = { studies: { study_uid: string; files: { sha256: string }[] }[]; version?: string; unchanged?: boolean };
const assigned = async (known?: string): Promise<Assigned> => {
  const answer = await t.request('GET', `/v1/sync/assigned${known ? `?known=${known}` : ''}`, { key, headers: { 'Mia-Sync-Protocol': '1' } });
  expect(answer.status, answer.text).toBe(200);
  return answer.json.data as Assigned;
};

describe('assigned studies', () => {
  it('lists the files once, then says unchanged until a file or an assignment is added', async () => {
    const scan = await seedScan(t.server.services.db);
    const files = [await addInstance(scan, 1), await addInstance(scan, 2)];
    const none = await assigned();
    expect(none.studies).toEqual([]);

    const made = await t.request('POST', '/v1/sync/assignments', { body: { study_uid: scan.studyUid, device_id: deviceId } });
    expect(made.status, made.text).toBe(201);
    // What the workstation knew (no studies) no longer holds: the list, with every file.
    const first = await assigned(none.version);
    expect(first.unchanged).toBeUndefined();
    expect(first.studies.map((s) => s.study_uid)).toEqual([scan.studyUid]);
    expect(first.studies[0]!.files.map((f) => f.sha256).sort()).toEqual([...files].sort());

    const again = await assigned(first.version);
    expect(again).toEqual({ studies: [], version: first.version, unchanged: true });

    // A file more in the study: the list again, with it.
    const third = await addInstance(scan, 3);
    const grown = await assigned(first.version);
    expect(grown.unchanged).toBeUndefined();
    expect(grown.studies[0]!.files.map((f) => f.sha256)).toContain(third);
    expect(grown.version).not.toBe(first.version);

    // Another study assigned: the list again, with both.
    const other = await seedScan(t.server.services.db);
    await addInstance(other, 1);
    expect((await t.request('POST', '/v1/sync/assignments', { body: { study_uid: other.studyUid, device_id: deviceId } })).status).toBe(201);
    const both = await assigned(grown.version);
    expect(both.studies.map((s) => s.study_uid).sort()).toEqual([scan.studyUid, other.studyUid].sort());

    // Without a version (a workstation checking its files, or one from before versions), the list.
    expect((await assigned()).studies).toHaveLength(2);
    expect((await t.request('GET', '/v1/sync/assigned?known=yesterday', { key, headers: { 'Mia-Sync-Protocol': '1' } })).status).toBe(400);
  });
});
