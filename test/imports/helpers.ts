/** Helpers for the import tests: following a job over SSE, reading PNGs, running the real CLI. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
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

export { readPng, type Png } from '../helpers/png.ts';

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
