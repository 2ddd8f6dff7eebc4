/**
 * A workstation sending a large file to a hub that goes away between its two requests: the hub
 * says where its copy ends, then refuses the connection the range would go on. The file opened
 * as that range's body must be closed, or every sync round of an unreachable hub keeps one more
 * descriptor on it. The hub here is a double at the network's edge: it answers the one question
 * and stops listening.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { sendInRanges } from '#server/sync/client.ts';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** This process's descriptors open on `path`. */
function descriptorsOn(path: string): number {
  let open = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(join('/proc/self/fd', fd)) === path) open += 1;
    } catch {
      // Closed while listed.
    }
  }
  return open;
}

it('closes the file of a range whose connection the hub refused', async () => {
  // Resolved: /proc's links name the file by its real path, whatever links the temp folder goes through.
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'mia-sync-file-')));
  const file = join(dir, 'instance.dcm');
  const bytes = randomBytes(256 * 1024);
  writeFileSync(file, bytes);
  const sha256 = createHash('sha256').update(bytes).digest('hex');

  const asked: string[] = [];
  const hub = createServer((req, res) => {
    asked.push(`${req.method ?? ''} ${req.url ?? ''}`);
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ data: { received: 0, complete: false } }), () => {
      hub.close();
      hub.closeAllConnections();
    });
  });
  await new Promise<void>((resolve) => hub.listen(0, '127.0.0.1', resolve));
  const address = hub.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const link = { url: `http://127.0.0.1:${address.port}`, device_id: 'd', device_name: 'w', key: 'unused' };

  await expect(sendInRanges(link, sha256, file, bytes.length)).rejects.toThrow(/hub unreachable: PUT \/v1\/sync\/blobs\//);
  expect(asked).toEqual([`GET /v1/sync/blobs/${sha256}/upload`]);
  await expect.poll(() => descriptorsOn(file), { timeout: 2000 }).toBe(0);
});
