/**
 * Helpers for the analysis job tests: phantom DICOM series with their truth (phantoms.py),
 * following a job over HTTP (SSE or polling), and scoring findings against the truth the way
 * train.py scores its evaluation (right label, IoU >= 0.3 on one of the lesion's own slices).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { iou } from '#server/analysis/nms.ts';
import type { TestServer } from '../helpers/server.ts';
import { MODEL_DIR, python, type TruthBox } from './helpers.ts';

export type TruthLesion = {
  label: string;
  instance_uid: string;
  frame: number;
  box: TruthBox;
  slices: Array<{ slice_index: number; instance_uid: string; frame: number; box: TruthBox }>;
};
export type TruthSeries = { seed: number; modality: 'CT' | 'MR'; scan_uid: string; slices: number; lesions: TruthLesion[] };

/** Writes DICOM series into `dir/<name>` and returns their truth. */
export async function phantomDicom(
  dir: string,
  name: string,
  opts: { seed: number; series: number; modality?: 'CT' | 'MR' | 'both'; kinds?: string; slices?: number; size?: number },
): Promise<TruthSeries[]> {
  const out = join(dir, name);
  const truth = join(dir, `${name}.truth.json`);
  const args = [join(MODEL_DIR, 'phantoms.py'), '--out', out, '--truth', truth, '--seed', String(opts.seed), '--series', String(opts.series), '--modality', opts.modality ?? 'both'];
  if (opts.kinds) args.push('--kinds', opts.kinds);
  if (opts.slices) args.push('--slices', String(opts.slices));
  if (opts.size) args.push('--size', String(opts.size));
  await python(args);
  return (JSON.parse(await readFile(truth, 'utf8')) as { series: TruthSeries[] }).series;
}

export async function importFolder(t: TestServer, path: string): Promise<void> {
  const started = await t.request('POST', '/v1/imports', { body: { path } });
  if (started.status !== 202) throw new Error(`import: ${started.status} ${started.text}`);
  for (;;) {
    const job = await t.request('GET', `/v1/imports/${started.json.data.id}`);
    if (job.json.data.status !== 'running') {
      if (job.json.data.status !== 'completed') throw new Error(`import ${job.json.data.status}: ${job.text}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export type SseEvent = { event: string; data: any };

/** Reads a text/event-stream to its end (the server closes it after the terminal event). */
export async function readEvents(t: TestServer, path: string, key = t.adminKey): Promise<SseEvent[]> {
  const res = await fetch(t.url + path, { headers: { Authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('event:'))
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? '';
      const data = /^data: (.*)$/m.exec(block)?.[1] ?? 'null';
      return { event, data: JSON.parse(data) };
    });
}

export async function waitForJob(t: TestServer, id: string, timeoutMs = 60_000): Promise<any> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const reply = await t.request('GET', `/v1/analyses/${id}`);
    if (!['queued', 'running'].includes(reply.json.data.status)) return reply.json.data;
    if (Date.now() > until) throw new Error(`analysis ${id} still ${reply.json.data.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export type ResultFinding = { label: string; confidence: number; location: TruthBox; instance_uid: string; frame: number };

/** True when a finding of the lesion's label boxes it (IoU >= 0.3) on one of its slices. */
export function matches(f: ResultFinding, lesion: TruthLesion): boolean {
  if (f.label !== lesion.label) return false;
  return lesion.slices.some((s) => s.instance_uid === f.instance_uid && s.frame === f.frame && iou(f.location, s.box) >= 0.3);
}

export type Score = { perLabel: Record<string, { found: number; total: number }>; falsePositives: number; series: number };

export function score(truth: readonly TruthSeries[], findingsOf: (scanUid: string) => readonly ResultFinding[]): Score {
  const perLabel: Score['perLabel'] = {};
  let falsePositives = 0;
  for (const s of truth) {
    const findings = findingsOf(s.scan_uid);
    const used = new Set<number>();
    for (const lesion of s.lesions) {
      const entry = (perLabel[lesion.label] ??= { found: 0, total: 0 });
      entry.total += 1;
      const hit = findings.findIndex((f, i) => !used.has(i) && matches(f, lesion));
      if (hit >= 0) {
        used.add(hit);
        entry.found += 1;
      }
    }
    falsePositives += findings.filter((f, i) => !used.has(i) && !s.lesions.some((l) => matches(f, l))).length;
  }
  return { perLabel, falsePositives, series: truth.length };
}
