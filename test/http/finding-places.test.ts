/**
 * Issue 11, reading tools: findings are reported as sizes in mm with their slice (from each
 * frame's own pixel spacing), and findings of one lesion on neighbouring slices are grouped with
 * their 3D extent, in the results API, the report and the exports.
 */
import { XMLValidator } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '#server/store/database.ts';
import { insertInstance } from '#server/store/archive-index.ts';
import { parseCsv } from '../helpers/csv.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { instanceInput, seedAnalysis, seedScan, uid, type SeededScan } from '../helpers/seed.ts';

let t: TestServer;
let reader: { key: string; userId: string };
beforeAll(async () => {
  t = await startTestServer();
  reader = await t.keyFor('radiologist', { email: 'reader@hospital.test' });
});
afterAll(async () => {
  await t.close();
});

/** Classic images at positions 10, 15, ... mm (inserted out of order), spacing 0.5 mm rows x 0.8 mm columns. */
async function addSlices(scan: SeededScan, count: number, spacing: [number, number] | null = [0.5, 0.8]): Promise<string[]> {
  const uids = Array.from({ length: count }, () => uid());
  await inTransaction(t.server.services.db, async (tx) => {
    for (const i of [...uids.keys()].reverse()) {
      await insertInstance(
        tx,
        scan.scanRef,
        instanceInput({
          sopInstanceUid: uids[i]!,
          instanceNumber: i + 1,
          position: 10 + 5 * i,
          pixelSpacing: spacing ? JSON.stringify(spacing) : null,
          filePath: `missing/${uids[i]!}.dcm`,
          fileSha256: 'cd'.repeat(32),
        }),
        '2026-03-01T08:00:00.000Z',
      );
    }
  });
  return uids;
}

type Place = { slice: number; slices: number; position_mm: number | null; width_mm: number | null; height_mm: number | null };
type ResultFinding = { id: string; label: string; instance_uid: string; place: Place | null };
type Lesion = { id: string; label: string; finding_ids: string[]; first_slice: number | null; last_slice: number | null; slices: number | null; largest_diameter_mm: number | null; review: string | null };

const result = async (scanId: string) => (await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data as { findings: ResultFinding[]; lesions: Lesion[] };

describe('findings in millimetres with their slice', () => {
  it("gives each finding its slice in the viewer's order and its box in mm from the pixel spacing", async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const slices = await addSlices(scan, 6);
    await seedAnalysis(t.server.services.db, scan, [{ label: 'tumor_detected', x: 100, y: 80, width: 30, height: 40, instanceUid: slices[2]! }]);
    const [finding] = (await result(scan.scanId)).findings;
    // Width runs along a row (column spacing 0.8 mm), height along a column (row spacing 0.5 mm).
    expect(finding?.place).toEqual({ slice: 3, slices: 6, position_mm: 20, width_mm: 24, height_mm: 20 });
  });

  it('uses the frame its own spacing and position on an Enhanced image, frames numbered by position', async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const [enhanced] = await addSlices(scan, 1);
    // Three frames stored head-to-foot (positions 30, 20, 10): the stack shows frame 2 first.
    const values = [30, 20, 10].map((position, frame) => ({
      position,
      image_position: [0, 0, position],
      pixel_spacing: frame === 1 ? [0.25, 0.25] : [0.5, 0.5],
      rescale_slope: 1,
      rescale_intercept: -1024,
      window_center: null,
      window_width: null,
    }));
    (await t.server.services.db.run('UPDATE instances SET frames = 3, frame_values = ? WHERE sop_instance_uid = ?', [JSON.stringify(values), enhanced]));
    await seedAnalysis(t.server.services.db, scan, [{ width: 40, height: 40, instanceUid: enhanced!, frame: 1 }]);
    const [finding] = (await result(scan.scanId)).findings;
    expect(finding?.place).toEqual({ slice: 2, slices: 3, position_mm: 20, width_mm: 10, height_mm: 10 });
  });

  it('numbers slices as the viewer lists the instances when positions are missing or shared and an image has frames', async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const [a, b, c, d] = await addSlices(scan, 4);
    const db = t.server.services.db;
    // a: three frames at 10 mm; d: also at 10 mm, after a by instance number; b: no position, so last.
    await db.run('UPDATE instances SET frames = 3 WHERE sop_instance_uid = ?', [a]);
    await db.run('UPDATE instances SET position = NULL WHERE sop_instance_uid = ?', [b]);
    await db.run('UPDATE instances SET position = 10 WHERE sop_instance_uid = ?', [d]);
    await seedAnalysis(db, scan, [
      { instanceUid: b!, confidence: 0.9 },
      { instanceUid: c!, confidence: 0.8 },
      { instanceUid: d!, confidence: 0.7 },
      { instanceUid: a!, confidence: 0.6, frame: 2 },
    ]);
    const places = new Map((await result(scan.scanId)).findings.map((f) => [f.instance_uid, f.place?.slice]));
    expect(places).toEqual(new Map([[a, 3], [d, 4], [c, 5], [b, 6]]));
    // The viewer's stack: the instances in the order the server lists them, each frame a slice.
    const listed = (await t.request('GET', `/v1/scans/${scan.scanId}/instances`)).json.data as { items: { instance_uid: string; frames: number }[] };
    const stack = listed.items.flatMap((i) => Array.from({ length: i.frames }, () => i.instance_uid));
    expect(stack.lastIndexOf(a!) + 1).toBe(3);
    expect([d, c, b].map((u) => stack.indexOf(u!) + 1)).toEqual([4, 5, 6]);
    expect((await result(scan.scanId)).findings[0]?.place?.slices).toBe(6);
  });

  it('renumbers a finding when more of its series arrives after its place was shown', async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const slices = await addSlices(scan, 4);
    await seedAnalysis(t.server.services.db, scan, [{ label: 'tumor_detected', instanceUid: slices[2]! }]);
    const list = async () => ((await t.request('GET', `/v1/scan/results?scan_id=${scan.scanId}`, { headers: { 'API-Version': '1.1' } })).json.data as { items: { findings: ResultFinding[] }[] }).items[0]?.findings[0]?.place;
    expect((await list())?.slice).toBe(3);
    expect((await list())?.slices).toBe(4);
    // Two more images of the series, both below it (positions 0 and 5 mm), imported meanwhile.
    const earlier = await addSlices(scan, 2);
    await t.server.services.db.run('UPDATE instances SET position = position - 10 WHERE sop_instance_uid IN (?, ?)', [earlier[0], earlier[1]]);
    expect(await list()).toMatchObject({ slice: 5, slices: 6 });
    expect((await result(scan.scanId)).findings[0]?.place).toMatchObject({ slice: 5, slices: 6 });
  });

  it('says the size is unknown (null) without pixel spacing rather than giving pixels as mm', async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const slices = await addSlices(scan, 2, null);
    await seedAnalysis(t.server.services.db, scan, [{ instanceUid: slices[1]! }]);
    expect((await result(scan.scanId)).findings[0]?.place).toEqual({ slice: 2, slices: 2, position_mm: 15, width_mm: null, height_mm: null });
  });
});

describe('one lesion, one finding', () => {
  it('groups same-label overlapping boxes on neighbouring slices, with first/last slice and largest diameter', async () => {
    const scan = await seedScan(t.server.services.db, { modality: 'CT' });
    const s = await addSlices(scan, 8);
    await seedAnalysis(t.server.services.db, scan, [
      // One tumour over slices 3-5 (boxes shift but overlap), largest on slice 4: 50 px x 0.8 = 40 mm.
      { label: 'tumor_detected', confidence: 0.9, x: 100, y: 100, width: 30, height: 30, instanceUid: s[2]! },
      { label: 'tumor_detected', confidence: 0.8, x: 110, y: 105, width: 50, height: 40, instanceUid: s[3]! },
      { label: 'tumor_detected', confidence: 0.7, x: 120, y: 110, width: 20, height: 20, instanceUid: s[4]! },
      // Same label, same slice range but elsewhere in the image: another lesion.
      { label: 'tumor_detected', confidence: 0.6, x: 10, y: 10, width: 10, height: 10, instanceUid: s[3]! },
      // Same box two slices away (slice 7): not a neighbour, another lesion.
      { label: 'tumor_detected', confidence: 0.6, x: 100, y: 100, width: 30, height: 30, instanceUid: s[6]! },
      // Another label over the tumour on slice 4: not the same lesion.
      { label: 'infarct_detected', confidence: 0.6, x: 110, y: 105, width: 50, height: 40, instanceUid: s[3]! },
    ]);
    const { findings, lesions } = await result(scan.scanId);
    const on = (slice: number, label = 'tumor_detected', x?: number) =>
      findings.find((f) => f.place?.slice === slice && f.label === label && (x === undefined || (f as unknown as { location: { x: number } }).location.x === x))!.id;
    expect(lesions).toHaveLength(4);
    const tumour = lesions.find((l) => l.finding_ids.length === 3)!;
    expect(tumour).toMatchObject({
      id: on(3),
      label: 'tumor_detected',
      finding_ids: [on(3), on(4, 'tumor_detected', 110), on(5)],
      first_slice: 3,
      last_slice: 5,
      slices: 8,
      largest_diameter_mm: 40,
      review: null,
    });
    expect(lesions.filter((l) => l.finding_ids.length === 1).map((l) => [l.label, l.first_slice])).toEqual(
      expect.arrayContaining([
        ['tumor_detected', 4],
        ['tumor_detected', 7],
        ['infarct_detected', 4],
      ]),
    );

    // The report carries the places in its snapshot and the lesions with the verdict of the lesion.
    expect((await t.request('PATCH', `/v1/findings/${on(4, 'tumor_detected', 110)}`, { key: reader.key, body: { review: 'accepted' } })).status).toBe(200);
    const report = (await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: scan.scanId } })).json.data;
    expect(report.findings.find((f: ResultFinding) => f.id === on(3)).place).toMatchObject({ slice: 3, width_mm: 24, height_mm: 15 });
    expect(report.lesions.find((l: Lesion) => l.id === on(3))).toMatchObject({ first_slice: 3, last_slice: 5, largest_diameter_mm: 40, review: 'accepted' });

    // Exports: the report CSV lists the lesions; the results CSV gives mm, slice and lesion per finding.
    const csv = parseCsv((await t.request('GET', `/v1/reports?format=csv&scan_id=${scan.scanId}`, { key: reader.key })).text);
    const lesionsCell = csv[1]![csv[0]!.indexOf('lesions')]!;
    expect(lesionsCell.split('\n')).toContain('tumor_detected: slices 3-5 of 8, largest 40 mm (accepted)');
    const xml = (await t.request('GET', `/v1/reports?format=xml&scan_id=${scan.scanId}`, { key: reader.key })).text;
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(xml).toMatch(new RegExp(`<lesion><id>${on(3)}</id><label>tumor_detected</label><finding_ids><finding_id>${on(3)}</finding_id>`));
    expect(xml).toContain('<first_slice>3</first_slice><last_slice>5</last_slice><slices>8</slices><largest_diameter_mm>40</largest_diameter_mm>');
    const rows = parseCsv((await t.request('GET', `/v1/scan/results?format=csv&scan_id=${scan.scanId}`, { key: reader.key, headers: { 'API-Version': '1.1' } })).text);
    const h = rows[0]!;
    const row = rows.find((r) => r[h.indexOf('finding_id')] === on(5))!;
    expect([row[h.indexOf('slice')], row[h.indexOf('width_mm')], row[h.indexOf('height_mm')], row[h.indexOf('lesion_id')]]).toEqual(['5', '16', '10', on(3)]);
    // An export file works the places out on its own (it does not keep them): the same lines.
    const created = await t.request('POST', '/v1/exports', { body: { format: 'csv', filters: { scan_id: scan.scanId } } });
    expect(created.status).toBe(201);
    const exported = parseCsv((await t.request('GET', created.json.data.download_url)).text);
    expect(exported).toEqual(rows);
  });
});
