/**
 * Stored files read for their frames (server/imaging/stored-files.ts): requests at the same moment
 * share one read, a multi-frame file stays for the next frame's request, and what is kept stays
 * within its bytes, the file used longest ago dropped first.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { readDicom } from '#server/dicom/parse.ts';
import { createStoredFiles, type StoredFile } from '#server/imaging/stored-files.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';

const bytes = new Uint8Array(readFileSync(CT_SMALL));

async function fileOf(size = bytes.byteLength): Promise<StoredFile> {
  const parsed = await readDicom(bytes);
  if (!parsed.ok) throw new Error(parsed.reason);
  return { bytes: new Uint8Array(size), instance: parsed.instance };
}

it('reads a file once for requests at the same moment, and keeps it only when asked to', async () => {
  const files = createStoredFiles(10 * bytes.byteLength);
  let reads = 0;
  const load = async (): Promise<StoredFile> => {
    reads += 1;
    await new Promise((resolve) => setTimeout(resolve, 5));
    return await fileOf();
  };
  const eight = await Promise.all(Array.from({ length: 8 }, () => files.get('cine.dcm', load, true)));
  expect(reads).toBe(1);
  expect(new Set(eight).size).toBe(1);
  await files.get('cine.dcm', load, true);
  expect(reads).toBe(1);

  await Promise.all([files.get('slice.dcm', load, false), files.get('slice.dcm', load, false)]);
  expect(reads).toBe(2);
  await files.get('slice.dcm', load, false);
  expect(reads).toBe(3);
  expect(files.bytes).toBe(bytes.byteLength);
});

it('keeps at most its bytes, dropping the file used longest ago; a failed read is not kept', async () => {
  const files = createStoredFiles(3000);
  let reads = 0;
  const load = (size: number) => async (): Promise<StoredFile> => {
    reads += 1;
    return await fileOf(size);
  };
  await files.get('a', load(1000), true);
  await files.get('b', load(1000), true);
  await files.get('a', load(1000), true);
  await files.get('c', load(1500), true);
  expect(files.bytes).toBeLessThanOrEqual(3000);
  const before = reads;
  await files.get('a', load(1000), true);
  expect(reads).toBe(before);
  await files.get('b', load(1000), true);
  expect(reads).toBe(before + 1);
  // Larger than everything it may keep: served, not kept.
  await files.get('huge', load(4000), true);
  expect(files.bytes).toBeLessThanOrEqual(3000);

  await expect(files.get('bad', () => Promise.reject(new Error('unreadable')), true)).rejects.toThrow('unreadable');
  await files.get('bad', load(10), true);
  expect(reads).toBe(before + 3);
});
