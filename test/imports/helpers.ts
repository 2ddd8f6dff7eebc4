/** Helpers for the import tests: following a job over SSE, reading PNGs, running the real CLI. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import type { TestServer } from '../helpers/server.ts';

export const BIN = join(import.meta.dirname, '../../bin/mia.js');
export const PHANTOMS = join(import.meta.dirname, '../../models/mia-phantom-detector/phantoms.py');

export type SseEvent = { event: string; data: any };

/** Reads a job's event stream with fetch (as the renderer does) until it ends. */
export async function followJob(t: TestServer, id: string, key = t.adminKey): Promise<SseEvent[]> {
  const reply = await fetch(`${t.url}/v1/imports/${id}/events`, { headers: { Authorization: `Bearer ${key}` } });
  if (reply.status !== 200 || !reply.body) throw new Error(`events: ${reply.status} ${await reply.text()}`);
  if (!reply.headers.get('content-type')?.startsWith('text/event-stream')) throw new Error('not an event stream');
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of reply.body) {
    text += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = text.indexOf('\n\n')) >= 0) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      if (block.startsWith(':')) continue;
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1] ?? 'null';
      events.push({ event, data: JSON.parse(data) });
    }
  }
  return events;
}

export type Png = { width: number; height: number; channels: number; pixels: Uint8Array };

/** A PNG reader for 8-bit grey and RGB, non-interlaced, all five filter types (PNG spec 9). */
export function readPng(file: Buffer): Png {
  if (file.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (offset < file.length) {
    const length = file.readUInt32BE(offset);
    const type = file.toString('latin1', offset + 4, offset + 8);
    const data = file.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      if (data[8] !== 8 || data[12] !== 0) throw new Error('unsupported PNG layout');
      channels = data[9] === 0 ? 1 : data[9] === 2 ? 3 : 0;
      if (channels === 0) throw new Error(`unsupported colour type ${data[9]}`);
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const v = raw[y * (stride + 1) + 1 + x]!;
      const a = x >= channels ? out[y * stride + x - channels]! : 0;
      const b = y > 0 ? out[(y - 1) * stride + x]! : 0;
      const c = x >= channels && y > 0 ? out[(y - 1) * stride + x - channels]! : 0;
      let pred = 0;
      if (filter === 1) pred = a;
      else if (filter === 2) pred = b;
      else if (filter === 3) pred = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[y * stride + x] = (v + pred) & 0xff;
    }
  }
  return { width, height, channels, pixels: out };
}

export function runMia(args: string[], dataDir: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [BIN, ...args, '--data', dataDir], { encoding: 'utf8', timeout: 120_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

export function makePhantoms(out: string, options: { series: number; seed: number; size?: number; slices?: number; modality?: 'CT' | 'MR' | 'both' }): void {
  const run = spawnSync(
    '/usr/bin/python3',
    [PHANTOMS, '--out', out, '--series', String(options.series), '--seed', String(options.seed), '--size', String(options.size ?? 64),
      '--slices', String(options.slices ?? 20), '--modality', options.modality ?? 'both'],
    { encoding: 'utf8', timeout: 120_000 },
  );
  if (run.status !== 0) throw new Error(`phantoms.py failed: ${run.stderr}`);
}
