/**
 * The archive writer (server/imports/archive.ts) on a real folder: a batch whose move into place
 * is refused leaves no staged copy behind, so a caller retrying it does not pile up copies of the
 * instances in the staging folder.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { archivePathFor, createArchiveWriter, isArchiveTempName, STAGING_DIR } from '#server/imports/archive.ts';
import { CT_SMALL, PYDICOM_CORPUS } from '../helpers/image-fixture.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mia-archive-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const staged = (): string[] =>
  readdirSync(join(dataDir, STAGING_DIR), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && isArchiveTempName(entry.name))
    .map((entry) => entry.name);

describe('archive batches', () => {
  it('removes the staged copies of a batch whose rename is refused, on every try', async () => {
    const files = [CT_SMALL, join(PYDICOM_CORPUS, 'MR_small.dcm')].map((path) => {
      const bytes = readFileSync(path);
      return { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
    });
    // The first one's place in the archive is taken by a folder: its rename fails (EISDIR).
    mkdirSync(join(dataDir, archivePathFor(files[0]!.sha256)), { recursive: true });
    const archive = createArchiveWriter(dataDir);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      for (const f of files) archive.stage(f.bytes, f.sha256);
      await expect(archive.flush()).rejects.toThrow();
      await archive.discard();
      expect(staged(), `after attempt ${attempt + 1}`).toEqual([]);
    }
  });
});
