/**
 * mia's DICOMweb client against remotes that misbehave (issue 14): answers too large, not JSON,
 * not multipart, cut short, refusing; a study that is partly junk. Each remote is a real HTTP
 * server on loopback playing the peer; nothing half-read is stored, the spool is cleaned up.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SEARCH_BYTES, pullFromRemote, searchRemote } from '#server/dicomweb/client.ts';
import { MiaError } from '#server/errors.ts';
import { UPLOADS_DIR } from '#server/imports/upload.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

let t: TestServer;
let remote: Server;
let url = '';
let handler: Handler = (_req, res) => res.end();

const STUDY = '1.2.826.0.1.3680043.10.99';
const SERIES = '1.2.826.0.1.3680043.10.99.1';
const seriesList = JSON.stringify([{ '0020000E': { vr: 'UI', Value: [SERIES] } }]);

async function refusal(work: Promise<unknown>): Promise<MiaError> {
  const error = await work.then(() => null, (e: unknown) => e);
  if (!(error instanceof MiaError)) throw new Error(`expected a MiaError, got ${String(error)}`);
  return error;
}

function spoolLeft(): string[] {
  try {
    return readdirSync(join(t.dataDir, UPLOADS_DIR));
  } catch {
    return [];
  }
}

beforeAll(async () => {
  t = await startTestServer();
  remote = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => remote.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(remote.address() as { port: number }).port}/dicom-web`;
});

afterAll(async () => {
  remote.closeAllConnections();
  await new Promise((resolve) => remote.close(resolve));
  await t.close();
});

describe('searching a remote', () => {
  it('refuses an answer larger than its cap, declared or streamed', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/dicom+json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const more = (): void => {
        while (sent <= MAX_SEARCH_BYTES) {
          sent += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', more);
            return;
          }
        }
        res.end();
      };
      res.on('error', () => undefined);
      more();
    };
    const streamed = await refusal(searchRemote({ url, headers: {} }, 'studies', {}));
    expect(streamed.message).toContain('too large');
    handler = (_req, res) => res.writeHead(200, { 'Content-Type': 'application/dicom+json', 'Content-Length': String(MAX_SEARCH_BYTES + 1) }).end();
    const declared = await refusal(searchRemote({ url, headers: {} }, 'studies', {}));
    expect(declared.message).toContain('too large');
  });

  it('refuses an answer that is not a DICOM JSON array, and names a refusing server', async () => {
    handler = (_req, res) => res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end('<html>login</html>');
    expect((await refusal(searchRemote({ url, headers: {} }, 'studies', {}))).message).toContain('not JSON');
    handler = (_req, res) => res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end('[{"PatientName": "x"}]');
    expect((await refusal(searchRemote({ url, headers: {} }, 'studies', {}))).message).toContain('not a DICOM JSON array');
    handler = (_req, res) => res.writeHead(401).end();
    expect((await refusal(searchRemote({ url, headers: {} }, 'studies', {}))).details).toContain('HTTP 401');
    handler = (_req, res) => res.writeHead(204).end();
    expect(await searchRemote({ url, headers: {} }, 'studies', {})).toEqual([]);
  });

  it('sends the peer\'s headers and the filters', async () => {
    let seen: IncomingMessage | undefined;
    handler = (req, res) => {
      seen = req;
      res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end('[]');
    };
    await searchRemote({ url: `${url}/`, headers: { Authorization: 'Basic abc' } }, 'studies', { PatientName: 'DOE*', StudyDate: '20200101-' });
    expect(seen?.headers['authorization']).toBe('Basic abc');
    expect(seen?.url).toBe('/dicom-web/studies?PatientName=DOE*&StudyDate=20200101-');
  });
});

describe('pulling from a remote', () => {
  const boundary = 'remote-boundary';
  const part = (bytes: Buffer, type = 'application/dicom'): Buffer => Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Type: ${type}\r\n\r\n`), bytes, Buffer.from('\r\n')]);
  const serve = (body: (req: IncomingMessage) => Buffer | null, contentType = `multipart/related; type="application/dicom"; boundary=${boundary}`): Handler => (req, res) => {
    if (req.url?.endsWith('/series')) {
      res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end(seriesList);
      return;
    }
    const bytes = body(req);
    if (bytes === null) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': contentType }).end(bytes);
  };

  it('imports the good parts of a series and lists the bad ones', async () => {
    handler = serve(() => Buffer.concat([part(readFileSync(CT_SMALL)), part(Buffer.from('not dicom')), Buffer.from(`--${boundary}--\r\n`)]));
    const result = await pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY }, 'test');
    expect(result.series).toBe(1);
    expect(result.counts.imported).toBe(1);
    expect(result.counts.rejected).toBe(1);
    expect(result.problems).toHaveLength(1);
    expect(spoolLeft()).toEqual([]);
  });

  it('stores nothing from a body cut short or not multipart, and leaves no spooled file', async () => {
    const before = (await t.request('GET', '/dicom-web/instances')).json as unknown[];
    handler = serve(() => Buffer.concat([part(readFileSync(CT_SMALL)).subarray(0, 5000)]));
    const cut = await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY, seriesUid: SERIES }, 'test'));
    expect(cut.details).toContain('closing boundary');
    handler = serve(() => readFileSync(CT_SMALL), 'application/dicom');
    const single = await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY, seriesUid: SERIES }, 'test'));
    expect(single.message).toContain('multipart/related');
    expect((await t.request('GET', '/dicom-web/instances')).json).toHaveLength(before.length);
    expect(spoolLeft()).toEqual([]);
  });

  it('gives up on a remote that stops sending mid-series, storing nothing', async () => {
    const stalled: ServerResponse[] = [];
    handler = (req, res) => {
      if (req.url?.endsWith('/series')) {
        res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end(seriesList);
        return;
      }
      res.writeHead(200, { 'Content-Type': `multipart/related; type="application/dicom"; boundary=${boundary}` });
      res.write(part(readFileSync(CT_SMALL)).subarray(0, 3000));
      stalled.push(res);
    };
    const before = ((await t.request('GET', '/dicom-web/instances')).json as unknown[]).length;
    const stopped = await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY }, 'test', { idleMs: 300 }));
    expect(stopped.message).toContain('stopped sending');
    expect((await t.request('GET', '/dicom-web/instances')).json).toHaveLength(before);
    expect(spoolLeft()).toEqual([]);
    for (const res of stalled) res.destroy();
  });

  it('stops reading an answer it refused before its end (no boundary), however long the remote goes on', async () => {
    let sent = 0;
    let closed = false;
    handler = (req, res) => {
      if (req.url?.endsWith('/series')) {
        res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end(seriesList);
        return;
      }
      res.writeHead(200, { 'Content-Type': 'multipart/related; type="application/dicom"' });
      res.once('close', () => (closed = true));
      const chunk = Buffer.alloc(256 * 1024, 0x41);
      // Endless: a megabyte a few milliseconds for as long as anyone reads.
      const more = (): void => {
        if (closed) return;
        sent += chunk.length;
        if (res.write(chunk)) setImmediate(more);
        else res.once('drain', more);
      };
      more();
    };
    const refused = await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY, seriesUid: SERIES }, 'test'));
    expect(refused.details ?? refused.message).toMatch(/boundary/);
    const deadline = performance.now() + 5_000;
    while (!closed && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(closed).toBe(true);
    const atClose = sent;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(sent).toBe(atClose);
    expect(spoolLeft()).toEqual([]);
  });

  it('says a study the remote does not have is not found', async () => {
    handler = (_req, res) => res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end('[]');
    const missing = await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: STUDY }, 'test'));
    expect(missing.kind).toBe('not_found');
    expect((await refusal(pullFromRemote(t.server.runtime, { url, headers: {} }, { studyUid: 'not a uid' }, 'test'))).kind).toBe('invalid');
  });
});
