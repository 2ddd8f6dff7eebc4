/**
 * `mia dicom` and the DICOM options of `mia serve` as a user types them wrong (issue 14): each
 * mistake is named, with exit 1, before anything connects or listens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '#server/cli/main.ts';
import { freePort } from '../helpers/orthanc.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mia-dicom-cli-'));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function mia(...args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const status = await main([...args, '--data', dataDir], { out: (line) => (out += line + '\n'), err: (line) => (err += line + '\n') });
  return { status, out, err };
}

describe('mia dicom', () => {
  it('names a missing or malformed peer option', async () => {
    expect(await mia('dicom', 'echo', '--port', '104', '--aec', 'PACS')).toMatchObject({ status: 1, err: expect.stringContaining('--host') });
    expect(await mia('dicom', 'echo', '--host', '127.0.0.1', '--aec', 'PACS')).toMatchObject({ status: 1, err: expect.stringContaining('--port') });
    expect(await mia('dicom', 'echo', '--host', '127.0.0.1', '--port', '104')).toMatchObject({ status: 1, err: expect.stringContaining('--aec') });
    expect(await mia('dicom', 'echo', '--host', '127.0.0.1', '--port', '104', '--aec', 'A_TITLE_LONGER_THAN_16')).toMatchObject({ status: 1, err: expect.stringContaining('AE title') });
    expect(await mia('dicom', 'find', '--host', '127.0.0.1', '--port', '104', '--aec', 'PACS', '--level', 'IMAGE')).toMatchObject({ status: 1, err: expect.stringContaining('--level') });
    expect(await mia('dicom', 'move', '--host', '127.0.0.1', '--port', '104', '--aec', 'PACS', '--study', '1.2.3')).toMatchObject({ status: 1, err: expect.stringContaining('--dest') });
    expect(await mia('dicom', 'move', '--host', '127.0.0.1', '--port', '104', '--aec', 'PACS', '--series', '1.2.3', '--dest', 'MIA')).toMatchObject({ status: 1, err: expect.stringContaining('--series needs --study') });
    expect(await mia('dicom', 'get')).toMatchObject({ status: 1, err: expect.stringContaining('expected echo, send, find or move') });
  });

  it('says when nothing listens at the peer', async () => {
    const port = await freePort();
    const result = await mia('dicom', 'echo', '--host', '127.0.0.1', '--port', String(port), '--aec', 'PACS');
    expect(result.status).toBe(1);
    expect(result.err).toMatch(/cannot connect to 127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
  });
});

describe('mia serve DICOM options', () => {
  it('refuses an invalid AE title, a malformed allow entry, and DICOM options without a port', async () => {
    expect(await mia('serve', '--dicom-port', '0', '--ae-title', 'BAD\\AE')).toMatchObject({ status: 1, err: expect.stringContaining('--ae-title') });
    expect(await mia('serve', '--dicom-port', '0', '--dicom-allow', 'CT1')).toMatchObject({ status: 1, err: expect.stringContaining('expected AE@host') });
    expect(await mia('serve', '--dicom-port', '0', '--dicom-allow', 'CT1@pacs.example')).toMatchObject({ status: 1, err: expect.stringContaining('not an IP address') });
    expect(await mia('serve', '--dicom-port', '0', '--dicom-allow', '*@*')).toMatchObject({ status: 1, err: expect.stringContaining('name each calling AE title') });
    expect(await mia('serve', '--ae-title', 'MIA')).toMatchObject({ status: 1, err: expect.stringContaining('need --dicom-port') });
  });
});
