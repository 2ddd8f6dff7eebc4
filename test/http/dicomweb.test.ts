/**
 * mia as a DICOMweb server (issue 14): QIDO-RS matching on the index, WADO-RS files byte for
 * byte, metadata, frames and rendered frames, STOW-RS answers, and the refusals a client meets.
 * Real files from pydicom's corpus, and dcmodify'd copies of them for studies of their own.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_SMALL, PYDICOM_CORPUS } from '../helpers/image-fixture.ts';
import { fetchBytes, splitMultipart, stowBody, variantOf } from '../helpers/dicomweb.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const MR_SMALL = `${PYDICOM_CORPUS}/MR_small.dcm`;
const MR_RLE = `${PYDICOM_CORPUS}/MR_small_RLE.dcm`;
const JPEG2000 = `${PYDICOM_CORPUS}/JPEG2000.dcm`;
const STOW_HEADERS = (contentType: string) => ({ 'Content-Type': contentType, Accept: 'application/dicom+json' });

type Json = Record<string, { vr: string; Value?: unknown[]; BulkDataURI?: string; InlineBinary?: string }>;

let t: TestServer;
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const ct = readFileSync(CT_SMALL);
const mr = readFileSync(MR_SMALL);
const j2k = readFileSync(JPEG2000);
// Studies of their own: an accented name (UTF-8), another date and accession.
const muller = variantOf(CT_SMALL, {
  '(0008,0005)': 'ISO_IR 192',
  '(0010,0010)': 'Müller^Hans Peter',
  '(0010,0020)': 'PID-MUELLER',
  '(0008,0020)': '20200615',
  '(0008,0050)': 'ACC-2020-1',
});
const older = variantOf(MR_SMALL, { '(0010,0010)': 'Smith^Anna', '(0010,0020)': 'PID-SMITH', '(0008,0020)': '20191231', '(0008,0050)': 'ACC-2019-7' });

const uidOf = (item: Json, tag: string): string => String(item[tag]?.Value?.[0] ?? '');

async function qido(path: string, key?: string): Promise<{ status: number; items: Json[]; json: any; headers: Headers }> {
  const reply = await t.request('GET', path, { headers: { Accept: 'application/dicom+json' }, ...(key ? { key } : {}) });
  return { status: reply.status, items: reply.status === 200 ? (reply.json as Json[]) : [], json: reply.json, headers: reply.headers };
}

beforeAll(async () => {
  t = await startTestServer();
  const body = stowBody([{ bytes: ct }, { bytes: mr }, { bytes: j2k }, { bytes: muller }, { bytes: older }]);
  const stored = await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) });
  expect(stored.status, stored.text).toBe(200);
});

afterAll(async () => {
  await t.close();
});

describe('QIDO-RS', () => {
  it('lists every study with the required return attributes', async () => {
    const { status, items, headers } = await qido('/dicom-web/studies');
    expect(status).toBe(200);
    expect(headers.get('content-type')).toContain('application/dicom+json');
    expect(items).toHaveLength(5);
    const mri = items.find((i) => uidOf(i, '00100020') === '4MR1');
    expect(mri?.['00100010']).toEqual({ vr: 'PN', Value: [{ Alphabetic: 'CompressedSamples^MR1' }] });
    expect(mri?.['00080061']).toEqual({ vr: 'CS', Value: ['MR'] });
    expect(mri?.['00201206']).toEqual({ vr: 'IS', Value: [1] });
    expect(mri?.['00201208']).toEqual({ vr: 'IS', Value: [1] });
    expect(mri?.['00080020']).toEqual({ vr: 'DA', Value: ['20040826'] });
    expect(mri?.['00080056']).toEqual({ vr: 'CS', Value: ['ONLINE'] });
    expect(String(mri?.['00081190']?.Value?.[0])).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/dicom-web\/studies\/1\.3\.6\.1\.4\.1\.5962\.1\.2\.4\./);
    // Type 2 attributes mia does not index are present, empty.
    expect(mri?.['00080090']).toEqual({ vr: 'PN' });
  });

  it('matches person names with wildcards, without regard to case or accents', async () => {
    expect((await qido('/dicom-web/studies?PatientName=compressedsamples*')).items).toHaveLength(3);
    expect((await qido('/dicom-web/studies?PatientName=CompressedSamples%5EM%3F1')).items.map((i) => uidOf(i, '00100020'))).toEqual(['4MR1']);
    const accentless = await qido('/dicom-web/studies?PatientName=muller*');
    expect(accentless.items.map((i) => uidOf(i, '00100020'))).toEqual(['PID-MUELLER']);
    expect(accentless.items[0]?.['00100010']).toEqual({ vr: 'PN', Value: [{ Alphabetic: 'Müller^Hans Peter' }] });
    expect((await qido('/dicom-web/studies?00100010=M%C3%BCller%5EHans%20Peter')).items).toHaveLength(1);
    expect((await qido('/dicom-web/studies?PatientName=Hans')).items).toHaveLength(0);
  });

  it('fuzzy matching finds a name by the prefix of any component', async () => {
    expect((await qido('/dicom-web/studies?PatientName=pet&fuzzymatching=true')).items.map((i) => uidOf(i, '00100020'))).toEqual(['PID-MUELLER']);
    expect((await qido('/dicom-web/studies?PatientName=HANS%20m%C3%BCl&fuzzymatching=true')).items).toHaveLength(1);
    expect((await qido('/dicom-web/studies?PatientName=ann&fuzzymatching=true')).items.map((i) => uidOf(i, '00100020'))).toEqual(['PID-SMITH']);
    expect((await qido('/dicom-web/studies?PatientName=eter&fuzzymatching=true')).items).toHaveLength(0);
  });

  it('matches dates and date ranges, accession numbers, patient IDs and lists of UIDs', async () => {
    const ids = async (q: string): Promise<string[]> => (await qido(`/dicom-web/studies?${q}`)).items.map((i) => uidOf(i, '00100020')).sort();
    expect(await ids('StudyDate=20200101-20201231')).toEqual(['PID-MUELLER']);
    expect(await ids('StudyDate=-20191231')).toEqual(['1CT1', '4MR1', '8NM1', 'PID-SMITH']);
    expect(await ids('StudyDate=20191231-')).toEqual(['PID-MUELLER', 'PID-SMITH']);
    expect(await ids('StudyDate=20040826')).toEqual(['4MR1', '8NM1']);
    expect(await ids('AccessionNumber=ACC-20*')).toEqual(['PID-MUELLER', 'PID-SMITH']);
    expect(await ids('PatientID=8NM1')).toEqual(['8NM1']);
    expect(await ids('ModalitiesInStudy=NM,CT')).toEqual(['1CT1', '8NM1', 'PID-MUELLER']);
    const all = (await qido('/dicom-web/studies')).items;
    const two = all.slice(0, 2).map((i) => uidOf(i, '0020000D'));
    expect((await qido(`/dicom-web/studies?StudyInstanceUID=${two.join(',')}`)).items.map((i) => uidOf(i, '0020000D')).sort()).toEqual(two.sort());
  });

  it('pages with limit and offset, and caps a huge limit with a Warning', async () => {
    const first = await qido('/dicom-web/studies?limit=2');
    const second = await qido('/dicom-web/studies?limit=2&offset=2');
    const third = await qido('/dicom-web/studies?limit=2&offset=4');
    const seen = [...first.items, ...second.items, ...third.items].map((i) => uidOf(i, '0020000D'));
    expect(new Set(seen).size).toBe(5);
    expect(third.items).toHaveLength(1);
    expect(first.headers.get('warning')).toBeNull();
    const huge = await qido('/dicom-web/studies?limit=100000000');
    expect(huge.status).toBe(200);
    expect(huge.items).toHaveLength(5);
    expect(huge.headers.get('warning')).toMatch(/^299 .*maximum/);

    // Every instance of the archive, a page at a time: each once (in stored order, not sorted).
    const every = (await qido('/dicom-web/instances?limit=100000')).items.map((i) => uidOf(i, '00080018'));
    const paged: string[] = [];
    for (let offset = 0; offset < every.length + 2; offset += 2) paged.push(...(await qido(`/dicom-web/instances?limit=2&offset=${offset}`)).items.map((i) => uidOf(i, '00080018')));
    expect(every.length).toBeGreaterThan(4);
    expect(paged).toEqual(every);
    expect(new Set(paged).size).toBe(every.length);
  });

  it('returns extra attributes with includefield, and all of them with includefield=all', async () => {
    const plain = (await qido('/dicom-web/studies?PatientID=4MR1')).items[0];
    expect(plain?.['00100030']).toEqual({ vr: 'DA' });
    expect(plain?.['00081030']).toBeUndefined();
    const more = (await qido('/dicom-web/studies?PatientID=4MR1&includefield=StudyDescription')).items[0];
    expect(more?.['00081030']).toBeDefined();
    const byTag = (await qido('/dicom-web/series?PatientID=4MR1&includefield=00180015')).items[0];
    expect(byTag?.['00180015']).toBeDefined();
    // OHIF's study search asks for Modality, a series attribute, and tags mia does not index: left out.
    const ohif = await qido('/dicom-web/studies?limit=101&offset=0&fuzzymatching=false&includefield=00081030%2C00080060%2C00081032&PatientID=4MR1');
    expect(ohif.status).toBe(200);
    expect(ohif.items[0]?.['00081030']).toBeDefined();
    expect(ohif.items[0]?.['00080060']).toBeUndefined();
    const all = (await qido('/dicom-web/studies?PatientID=4MR1&includefield=all')).items[0];
    expect(all?.['00081030']).toBeDefined();
    expect(all?.['00200010']).toEqual({ vr: 'SH' });
  });

  it('searches series and instances of a study, and across studies', async () => {
    const study = (await qido('/dicom-web/studies?PatientID=8NM1')).items[0];
    const studyUid = uidOf(study ?? {}, '0020000D');
    const series = (await qido(`/dicom-web/studies/${studyUid}/series`)).items;
    expect(series).toHaveLength(1);
    expect(series[0]?.['00080060']).toEqual({ vr: 'CS', Value: ['NM'] });
    expect(series[0]?.['00201209']).toEqual({ vr: 'IS', Value: [1] });
    const seriesUid = uidOf(series[0] ?? {}, '0020000E');
    const instances = (await qido(`/dicom-web/studies/${studyUid}/series/${seriesUid}/instances`)).items;
    expect(instances).toHaveLength(1);
    expect(instances[0]?.['00083002']).toBeUndefined();
    expect(instances[0]?.['00280008']).toEqual({ vr: 'IS', Value: [1] });
    expect(String(instances[0]?.['00081190']?.Value?.[0])).toContain(`/studies/${studyUid}/series/${seriesUid}/instances/`);
    expect((await qido('/dicom-web/series?Modality=MR')).items).toHaveLength(2);
    expect((await qido('/dicom-web/instances?SOPClassUID=1.2.840.10008.5.1.4.1.1.2')).items).toHaveLength(2);
    expect((await qido(`/dicom-web/studies/${studyUid}/instances`)).items).toHaveLength(1);
  });

  it('names the parameter at fault: unknown attribute, bad date, bad limit, wrong level', async () => {
    const unknown = await qido('/dicom-web/studies?Fruit=apple');
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.details).toContain('Fruit');
    const badDate = await qido('/dicom-web/studies?StudyDate=2020-13-01');
    expect(badDate.status).toBe(400);
    expect(badDate.json.error.details).toContain('StudyDate');
    const badRange = await qido('/dicom-web/studies?StudyDate=20201301x-');
    expect(badRange.status).toBe(400);
    const limit = await qido('/dicom-web/studies?limit=-1');
    expect(limit.status).toBe(400);
    expect(limit.json.error.details).toContain('limit');
    const level = await qido('/dicom-web/studies?SOPInstanceUID=1.2.3');
    expect(level.status).toBe(400);
    expect(level.json.error.details).toContain('SOPInstanceUID');
    const uid = await qido('/dicom-web/studies?StudyInstanceUID=1.2.x');
    expect(uid.status).toBe(400);
    const include = await qido('/dicom-web/studies?includefield=NoSuchThing');
    expect(include.status).toBe(400);
    expect(include.json.error.details).toContain('NoSuchThing');
    const offset = await qido('/dicom-web/studies?offset=99999999999');
    expect(offset.status).toBe(400);
    // Errors are the standard envelope.
    expect(unknown.json.status).toBe('error');
  });

  it('answers 406 to an Accept it cannot meet', async () => {
    const reply = await t.request('GET', '/dicom-web/studies', { headers: { Accept: 'application/dicom+xml' } });
    expect(reply.status).toBe(406);
  });
});

describe('WADO-RS', () => {
  async function place(patientId: string): Promise<{ study: string; series: string; sop: string }> {
    const [item] = (await qido(`/dicom-web/instances?PatientID=${patientId}&includefield=all`)).items;
    return { study: uidOf(item ?? {}, '0020000D'), series: uidOf(item ?? {}, '0020000E'), sop: uidOf(item ?? {}, '00080018') };
  }

  it('sends the stored files byte for byte as multipart/related', async () => {
    const p = await place('1CT1');
    const reply = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}`, t.adminKey, { Accept: 'multipart/related; type="application/dicom"; transfer-syntax=*' });
    expect(reply.status).toBe(200);
    const type = reply.headers.get('content-type') ?? '';
    expect(type).toMatch(/^multipart\/related; type="application\/dicom"; boundary=/);
    const parts = splitMultipart(type, reply.body);
    expect(parts).toHaveLength(1);
    expect(parts[0]?.headers['content-type']).toBe('application/dicom; transfer-syntax=1.2.840.10008.1.2.1');
    expect(sha(parts[0]?.body ?? Buffer.alloc(0))).toBe(sha(ct));
    const one = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}`, t.adminKey);
    expect(sha(splitMultipart(one.headers.get('content-type') ?? '', one.body)[0]?.body ?? Buffer.alloc(0))).toBe(sha(ct));
  });

  it('refuses a transfer syntax other than the stored one with 406, and unknown UIDs with 404', async () => {
    const p = await place('8NM1');
    const reply = await t.request('GET', `/dicom-web/studies/${p.study}`, { headers: { Accept: 'multipart/related; type="application/dicom"; transfer-syntax=1.2.840.10008.1.2.1' } });
    expect(reply.status).toBe(406);
    expect(reply.json.error.details).toContain('1.2.840.10008.1.2.4.91');
    expect((await t.request('GET', '/dicom-web/studies/1.2.3.4')).status).toBe(404);
    expect((await t.request('GET', `/dicom-web/studies/${p.study}/series/1.2.3.4`)).status).toBe(404);
    expect((await t.request('GET', '/dicom-web/studies/not-a-uid')).status).toBe(400);
    expect((await t.request('GET', `/dicom-web/studies/${p.study}`, { headers: { Accept: 'image/png' } })).status).toBe(406);
  });

  it('gives metadata as DICOM JSON: numbers, person names, sequences, pixel data as bulk data', async () => {
    const p = await place('1CT1');
    const reply = await t.request('GET', `/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/metadata`, { headers: { Accept: 'application/dicom+json' } });
    expect(reply.status).toBe(200);
    const [meta] = reply.json as Json[];
    expect(meta?.['00100010']).toEqual({ vr: 'PN', Value: [{ Alphabetic: 'CompressedSamples^CT1' }] });
    expect(meta?.['00280010']).toEqual({ vr: 'US', Value: [128] });
    expect(meta?.['00200013']?.vr).toBe('IS');
    expect(typeof meta?.['00200013']?.Value?.[0]).toBe('number');
    expect(meta?.['00200032']?.Value).toHaveLength(3);
    expect(typeof meta?.['00280030']?.Value?.[0]).toBe('number');
    expect(meta?.['7FE00010']?.BulkDataURI).toMatch(new RegExp(`/instances/${p.sop}/frames/1$`));
    expect(meta?.['7FE00010']?.Value).toBeUndefined();
    // CT_small holds Other Patient IDs Sequence (0010,1002): nested items.
    const seq = meta?.['00101002'];
    expect(seq?.vr).toBe('SQ');
    expect((seq?.Value as Json[])[0]?.['00100020']).toEqual({ vr: 'LO', Value: ['ABCD1234'] });
    expect(Object.keys(meta ?? {})).toEqual(Object.keys(meta ?? {}).sort());
    const study = await t.request('GET', `/dicom-web/studies/${p.study}/metadata`);
    expect(study.json).toHaveLength(1);
  });

  it('sends native frames as little-endian samples, and compressed frames as stored or decoded', async () => {
    const p = await place('1CT1');
    const frame = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/frames/1`, t.adminKey, { Accept: 'multipart/related; type="application/octet-stream"' });
    expect(frame.status).toBe(200);
    const [part] = splitMultipart(frame.headers.get('content-type') ?? '', frame.body);
    expect(part?.headers['content-type']).toContain('application/octet-stream');
    expect(part?.body.length).toBe(128 * 128 * 2);
    const raw = await fetchBytes(`${t.url}/v1/instances/${p.sop}/frames/0/raw`, t.adminKey);
    expect(sha(part?.body ?? Buffer.alloc(0))).toBe(sha(raw.body));

    const q = await place('8NM1');
    const base = `${t.url}/dicom-web/studies/${q.study}/series/${q.series}/instances/${q.sop}/frames/1`;
    const stored = await fetchBytes(base, t.adminKey, { Accept: 'multipart/related; type="image/jp2"' });
    const [j2kPart] = splitMultipart(stored.headers.get('content-type') ?? '', stored.body);
    expect(j2kPart?.headers['content-type']).toBe('image/jp2; transfer-syntax=1.2.840.10008.1.2.4.91');
    expect(j2kPart?.body.subarray(0, 2)).toEqual(Buffer.from([0xff, 0x4f]));
    const decoded = await fetchBytes(base, t.adminKey, { Accept: 'multipart/related; type="application/octet-stream"' });
    const [nativePart] = splitMultipart(decoded.headers.get('content-type') ?? '', decoded.body);
    expect(nativePart?.headers['content-type']).toContain('application/octet-stream');
    const rawNm = await fetchBytes(`${t.url}/v1/instances/${q.sop}/frames/0/raw`, t.adminKey);
    expect(sha(nativePart?.body ?? Buffer.alloc(0))).toBe(sha(rawNm.body));
    const beyond = await t.request('GET', `/dicom-web/studies/${q.study}/series/${q.series}/instances/${q.sop}/frames/2`);
    expect(beyond.status).toBe(404);
    const bad = await t.request('GET', `/dicom-web/studies/${q.study}/series/${q.series}/instances/${q.sop}/frames/0`);
    expect(bad.status).toBe(404);
    const junk = await t.request('GET', `/dicom-web/studies/${q.study}/series/${q.series}/instances/${q.sop}/frames/1,x`);
    expect(junk.status).toBe(400);
    // One frame listed again and again is not an answer of gigabytes: refused, naming it.
    const repeated = await t.request('GET', `/dicom-web/studies/${q.study}/series/${q.series}/instances/${q.sop}/frames/${Array(4000).fill(1).join(',')}`);
    expect(repeated.status).toBe(400);
    expect(repeated.json.error.details).toBe('frames: frame 1 is listed twice');
  });

  it('answers a frame that does not decode with a 422 and its reason, not a cut connection', async () => {
    // pydicom's JPEG 2000 file whose codestream is broken (it imports: its data set is whole).
    const broken = variantOf(`${PYDICOM_CORPUS}/JPEG2000-embedded-sequence-delimiter.dcm`, { '(0010,0020)': 'PID-BROKEN-J2K' });
    const body = stowBody([{ bytes: broken }]);
    expect((await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) })).status).toBe(200);
    const p = await place('PID-BROKEN-J2K');
    const answer = await t.request('GET', `/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/frames/1`, { headers: { Accept: 'multipart/related; type="application/octet-stream"' } });
    expect(answer.status).toBe(422);
    expect(answer.json.error.message).toBe('Frame 1 does not decode');
    expect(answer.json.error.details.length).toBeGreaterThan(0);
  });

  it('reads metadata from Implicit VR and Big Endian files with the same values as Explicit VR Little Endian', async () => {
    const variants = {
      implicit: variantOf(`${PYDICOM_CORPUS}/MR_small_implicit.dcm`, { '(0010,0020)': 'PID-IMPLICIT' }),
      big: variantOf(`${PYDICOM_CORPUS}/MR_small_bigendian.dcm`, { '(0010,0020)': 'PID-BIG' }),
    };
    const body = stowBody([{ bytes: variants.implicit }, { bytes: variants.big }]);
    expect((await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) })).status).toBe(200);
    const metaOf = async (patientId: string): Promise<Json> => {
      const p = await place(patientId);
      return ((await t.request('GET', `/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/metadata`)).json as Json[])[0] ?? {};
    };
    const reference = await metaOf('4MR1');
    for (const patientId of ['PID-IMPLICIT', 'PID-BIG']) {
      const meta = await metaOf(patientId);
      for (const tag of ['00280010', '00280011', '00280100', '00200032', '00200037', '00280030', '00100010', '00080060', '00180050']) {
        expect(meta[tag], `${patientId} ${tag}`).toEqual(reference[tag]);
      }
    }
  });

  it('sends several frames of a multi-frame image, compressed as stored or decoded', async () => {
    const twoFrames = variantOf(`${PYDICOM_CORPUS}/SC_rgb_rle_2frame.dcm`, { '(0010,0020)': 'PID-FRAMES' });
    const body = stowBody([{ bytes: twoFrames }]);
    expect((await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) })).status).toBe(200);
    const p = await place('PID-FRAMES');
    const base = `${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}`;
    const rle = await fetchBytes(`${base}/frames/2,1`, t.adminKey, { Accept: 'multipart/related; type="image/dicom-rle"' });
    const rleParts = splitMultipart(rle.headers.get('content-type') ?? '', rle.body);
    expect(rleParts.map((part) => part.headers['content-type'])).toEqual(['image/dicom-rle; transfer-syntax=1.2.840.10008.1.2.5', 'image/dicom-rle; transfer-syntax=1.2.840.10008.1.2.5']);
    expect(rleParts.map((part) => part.headers['content-location'])).toEqual([expect.stringMatching(/\/frames\/2$/), expect.stringMatching(/\/frames\/1$/)]);
    const native = await fetchBytes(`${base}/frames/1,2`, t.adminKey);
    const nativeParts = splitMultipart(native.headers.get('content-type') ?? '', native.body);
    expect(nativeParts).toHaveLength(2);
    for (const [i, part] of nativeParts.entries()) {
      const raw = await fetchBytes(`${t.url}/v1/instances/${p.sop}/frames/${i}/raw`, t.adminKey);
      expect(sha(part.body)).toBe(sha(raw.body));
    }
    expect(sha(nativeParts[0]?.body ?? Buffer.alloc(0))).not.toBe(sha(nativeParts[1]?.body ?? Buffer.alloc(0)));
    const second = await fetchBytes(`${base}/frames/2/rendered`, t.adminKey);
    expect(second.status).toBe(200);
    expect(second.headers.get('content-type')).toBe('image/png');
  });

  it('renders an instance and a frame as PNG', async () => {
    const p = await place('4MR1');
    const rendered = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/rendered`, t.adminKey, { Accept: 'image/png' });
    expect(rendered.status).toBe(200);
    expect(rendered.headers.get('content-type')).toBe('image/png');
    const v1 = await fetchBytes(`${t.url}/v1/instances/${p.sop}/frames/0/rendered`, t.adminKey);
    expect(sha(rendered.body)).toBe(sha(v1.body));
    const windowed = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/frames/1/rendered?window=100,200`, t.adminKey);
    expect(windowed.status).toBe(200);
    expect(sha(windowed.body)).not.toBe(sha(rendered.body));
    const jpeg = await t.request('GET', `/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/rendered`, { headers: { Accept: 'image/jpeg' } });
    expect(jpeg.status).toBe(406);
    // Well-formed quality and viewport are taken (PNG is lossless; the frame keeps its size);
    // malformed ones are a 400 naming them.
    const asked = await fetchBytes(`${t.url}/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/rendered?quality=90&viewport=512,512`, t.adminKey);
    expect(asked.status).toBe(200);
    for (const [name, value] of [['quality', '-1'], ['quality', '101'], ['viewport', 'a,b'], ['viewport', '99999999,1']]) {
      const bad = await t.request('GET', `/dicom-web/studies/${p.study}/series/${p.series}/instances/${p.sop}/rendered?${name}=${value}`);
      expect(bad.status, `${name}=${value}`).toBe(400);
      expect(bad.json.error.details).toContain(name);
    }
  });
});

describe('STOW-RS', () => {
  it('answers 200 with the stored instances and their Retrieve URLs (a duplicate is stored)', async () => {
    const body = stowBody([{ bytes: ct }]);
    const reply = await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) });
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toContain('application/dicom+json');
    const refs = (reply.json as Json)['00081199']?.Value as Json[];
    expect(refs).toHaveLength(1);
    expect(refs[0]?.['00081150']).toEqual({ vr: 'UI', Value: ['1.2.840.10008.5.1.4.1.1.2'] });
    const url = String(refs[0]?.['00081190']?.Value?.[0]);
    expect(url).toMatch(/\/dicom-web\/studies\/[\d.]+\/series\/[\d.]+\/instances\/[\d.]+$/);
    expect((reply.json as Json)['00081198']).toBeUndefined();
  });

  it('answers 202 when some parts fail, naming each failure', async () => {
    const fresh = variantOf(CT_SMALL, { '(0010,0020)': 'PID-PARTIAL' });
    const body = stowBody([{ bytes: fresh }, { bytes: Buffer.from('not dicom at all') }, { bytes: readFileSync(MR_RLE) }]);
    const reply = await t.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: STOW_HEADERS(body.contentType) });
    expect(reply.status).toBe(202);
    const failed = (reply.json as Json)['00081198']?.Value as Json[];
    const reasons = failed.map((f) => f['00081197']?.Value?.[0]).sort();
    // MR_small_RLE.dcm carries MR_small.dcm's SOP Instance UID with other bytes: 0x0111.
    expect(reasons).toEqual([0x0111, 0xc000].sort());
    expect(((reply.json as Json)['00081199']?.Value as Json[])).toHaveLength(1);
  });

  it('answers 409 when nothing is stored, and refuses instances of another study on /studies/{study}', async () => {
    const junk = stowBody([{ bytes: Buffer.from('junk') }]);
    const none = await t.request('POST', '/dicom-web/studies', { rawBody: junk.body, headers: STOW_HEADERS(junk.contentType) });
    expect(none.status).toBe(409);
    expect(((none.json as Json)['00081198']?.Value as Json[])[0]?.['00081197']).toEqual({ vr: 'US', Value: [0xc000] });

    const [study] = (await qido('/dicom-web/studies?PatientID=1CT1')).items;
    const studyUid = uidOf(study ?? {}, '0020000D');
    const other = variantOf(MR_SMALL, { '(0010,0020)': 'PID-OTHER' });
    const mixed = stowBody([{ bytes: ct }, { bytes: other }]);
    const reply = await t.request('POST', `/dicom-web/studies/${studyUid}`, { rawBody: mixed.body, headers: STOW_HEADERS(mixed.contentType) });
    expect(reply.status).toBe(202);
    expect((reply.json as Json)['00081190']?.Value?.[0]).toMatch(new RegExp(`/studies/${studyUid}$`));
    const failed = (reply.json as Json)['00081198']?.Value as Json[];
    expect(failed.map((f) => f['00081197']?.Value?.[0])).toEqual([0xc409]);
    expect((await qido('/dicom-web/studies?PatientID=PID-OTHER')).items).toHaveLength(0);
  });

  it('refuses a body that is not multipart/related with 415', async () => {
    const reply = await t.request('POST', '/dicom-web/studies', { rawBody: ct, headers: { 'Content-Type': 'application/dicom' } });
    expect(reply.status).toBe(415);
  });
});

describe('access', () => {
  it('reads need read:scans and a key; storing needs write:scans; reads are audited with the patients', async () => {
    expect((await t.request('GET', '/dicom-web/studies', { key: null })).status).toBe(401);
    const radiologist = (await t.keyFor('radiologist')).key;
    expect((await qido('/dicom-web/studies?PatientID=4MR1', radiologist)).status).toBe(200);
    const body = stowBody([{ bytes: ct }]);
    const refused = await t.request('POST', '/dicom-web/studies', { key: radiologist, rawBody: body.body, headers: STOW_HEADERS(body.contentType) });
    expect(refused.status).toBe(403);
    expect(refused.json.error.details).toContain('write:scans');
    await t.server.runtime.audit.flush();
    const audit = await t.request('GET', '/v1/audit?action=dicomweb.search&patient_id=4MR1');
    expect(audit.json.data.items.length).toBeGreaterThan(0);
  });
});
