import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkSources } from '#server/imports/import-job.ts';
import { listSourceFiles } from '#server/imports/sources.ts';

describe('import sources', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  function folder(): string {
    const dir = mkdtempSync(join(tmpdir(), 'mia-sources-'));
    dirs.push(dir);
    return dir;
  }

  it('lists files in name order, folders included, without DICOMDIR files or links to folders', async () => {
    const root = folder();
    const outside = folder();
    writeFileSync(join(outside, 'linked.dcm'), 'x');
    mkdirSync(join(root, 'b'));
    mkdirSync(join(root, 'B'));
    writeFileSync(join(root, 'b', '2.dcm'), 'x');
    writeFileSync(join(root, 'b', '10.dcm'), 'x');
    writeFileSync(join(root, 'B', 'upper.dcm'), 'x');
    writeFileSync(join(root, 'a.dcm'), 'x');
    writeFileSync(join(root, 'DICOMDIR'), 'x');
    // A link to a file is imported; a link to a folder (here a loop back to the root) is not walked.
    symlinkSync(join(outside, 'linked.dcm'), join(root, 'c-link.dcm'));
    symlinkSync(root, join(root, 'loop'));
    symlinkSync(join(outside, 'gone.dcm'), join(root, 'dangling.dcm'));

    const listing = await listSourceFiles([root]);

    expect(listing.missing).toEqual([]);
    expect(listing.files).toEqual([
      join(root, 'B', 'upper.dcm'),
      join(root, 'a.dcm'),
      join(root, 'b', '10.dcm'),
      join(root, 'b', '2.dcm'),
      join(root, 'c-link.dcm'),
    ]);
  });

  it('names a source that does not exist and lists the others', async () => {
    const root = folder();
    writeFileSync(join(root, 'one.dcm'), 'x');
    const listing = await listSourceFiles([join(root, 'nothing-here'), root]);
    expect(listing.missing).toEqual([join(root, 'nothing-here')]);
    expect(listing.files).toEqual([join(root, 'one.dcm')]);
  });

  it('refuses a source that is neither a file nor a folder (a FIFO, a device), naming what it is', async () => {
    const root = folder();
    const fifo = join(root, 'pipe');
    execFileSync('mkfifo', [fifo]);
    const listing = await listSourceFiles([fifo, '/dev/zero', root]);
    expect(listing.unusable).toEqual([`${fifo} (a FIFO)`, '/dev/zero (a character device)']);
    expect(listing.files).toEqual([]);
    // Before a job is made for them: a 400 naming them, not an import of nothing that succeeds.
    await expect(checkSources(['/dev/zero'])).rejects.toMatchObject({ kind: 'invalid', details: '/dev/zero (a character device): only files and folders of DICOM files are imported' });
    // Inside a folder, such entries are passed over like any non-file.
    expect((await listSourceFiles([root])).files).toEqual([]);
  });
});
