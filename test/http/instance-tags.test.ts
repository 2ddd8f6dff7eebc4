/**
 * GET /v1/instances/{uid}/tags, the DICOM tag browser (issue 11): the top-level tags of a real
 * file (pydicom's CT_small.dcm) with VR, name and printable values, bulk data left out; PHI is
 * shown to readers with read:scans and every read is audited with the patient.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_SMALL, seedImportedInstance, type SeededInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

type Tag = { tag: string; vr: string | null; name: string | null; length: number; value: string | null };

let t: TestServer;
let seeded: SeededInstance;

beforeAll(async () => {
  t = await startTestServer();
  seeded = await seedImportedInstance(t, CT_SMALL);
});

afterAll(async () => {
  await t?.close();
});

describe('instance tags', () => {
  it('lists file meta and data set tags with values read by their VR', async () => {
    const reply = await t.request('GET', `/v1/instances/${seeded.instanceUid}/tags`);
    expect(reply.status).toBe(200);
    expect(reply.json.data.instance_uid).toBe(seeded.instanceUid);
    const tags = reply.json.data.tags as Tag[];
    const byTag = new Map(tags.map((x) => [x.tag, x]));
    expect(tags[0]!.tag.startsWith('(0002,')).toBe(true);
    expect(byTag.get('(0002,0010)')).toMatchObject({ name: 'Transfer Syntax UID', value: '1.2.840.10008.1.2.1' });
    expect(byTag.get('(0010,0010)')).toMatchObject({ vr: 'PN', name: "Patient's Name", value: 'CompressedSamples^CT1' });
    expect(byTag.get('(0010,0020)')?.value).toBe('1CT1');
    // US read as a number, DS as text, multiple values joined by a backslash.
    expect(byTag.get('(0028,0010)')).toMatchObject({ vr: 'US', name: 'Rows', value: '128' });
    expect(byTag.get('(0028,0030)')?.value).toBe('0.661468\\0.661468');
    expect(byTag.get('(0020,0037)')?.value?.split('\\').map(Number)).toEqual([1, 0, 0, 0, 1, 0]);
    // Pixel data is listed with its length, not dumped.
    expect(byTag.get('(7FE0,0010)')).toMatchObject({ name: 'Pixel Data', value: null });
    expect(byTag.get('(7FE0,0010)')!.length).toBe(128 * 128 * 2);
  });

  it('audits each read with the patient; any key with read:scans may read (the auth matrix covers the 403)', async () => {
    await t.request('GET', `/v1/instances/${seeded.instanceUid}/tags`);
    const audit = await t.request('GET', `/v1/audit?action=instances.tags&patient_id=1CT1`);
    expect(audit.status).toBe(200);
    const items = audit.json.data.items as { target: string | null; patient_id: string | null }[];
    expect(items.length).toBeGreaterThanOrEqual(1);
    expect(items[0]).toMatchObject({ target: `instance:${seeded.instanceUid}`, patient_id: '1CT1' });
    const noScans = await t.keyFor('data_engineer', { email: 'tags@hospital.test' });
    expect((await t.request('GET', `/v1/instances/${seeded.instanceUid}/tags`, { key: noScans.key })).status).toBe(200);
    expect((await t.request('GET', '/v1/instances/1.2.3.4/tags')).status).toBe(404);
  });
});
