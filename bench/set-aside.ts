/**
 * What a benchmark is done with is set aside, not removed, until the process exits. On ext4
 * without a journal (this machine's root file system) the kernel will not reuse an inode freed
 * in the last minute or more, so a file created just after thousands were removed costs a scan
 * past each of them (ext4's recently_deleted: 28% of `mia serve`'s CPU receiving 2,000 C-STOREs
 * right after a removal). Removed between rounds, one contender's files charged the next one;
 * between sections of `npm run bench`, one benchmark's charged the next benchmark.
 *
 * A rename into a folder of set-aside things frees the path at once, as a removal would, and
 * frees no inode; everything set aside is removed when the process exits (an interrupted run
 * leaves it in the temporary folder, as it left its work folders before).
 */
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let aside: string | undefined;
let count = 0;

export function setAside(path: string): void {
  if (aside === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'mia-bench-set-aside-'));
    aside = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  try {
    renameSync(path, join(aside, String((count += 1))));
  } catch (err) {
    // Nothing there (already gone), or elsewhere than the temporary folder's file system.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') rmSync(path, { recursive: true, force: true });
  }
}
