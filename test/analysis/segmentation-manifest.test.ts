/**
 * Segmentation manifests (docs/models.md, Segmentation models): the example segmenter's is
 * valid, and a bad one is refused with the field named, before any model file is loaded.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadManifest, verifyModelFile } from '#server/analysis/manifest.ts';
import { manifestIssues, REPO_ROOT } from './helpers.ts';

const SEGMENTER_DIR = join(REPO_ROOT, 'example-models', 'mia-example-segmenter');

async function segmenterJson(): Promise<Record<string, unknown> & { output: Record<string, unknown> }> {
  return JSON.parse(await readFile(join(SEGMENTER_DIR, 'manifest.json'), 'utf8')) as Record<string, unknown> & { output: Record<string, unknown> };
}

describe('segmentation manifests', () => {
  it('the example segmenter validates, matches its file and says it is not for clinical use', async () => {
    const m = await loadManifest(SEGMENTER_DIR);
    expect(m.not_for_clinical_use).toBe(true);
    expect(m.output).toMatchObject({ decoding: 'segmentation', tensor: 'masks', activation: 'sigmoid_applied', stride: 2 });
    expect(m.output.channels).toEqual(m.labels.map((l) => l.label));
    const path = await verifyModelFile(SEGMENTER_DIR, m);
    expect((await readFile(path)).byteLength).toBeLessThan(1024 * 1024);
  });

  it('an unknown activation', async () => {
    const json = await segmenterJson();
    json.output.activation = 'relu';
    expect(manifestIssues(json)).toEqual([expect.stringMatching(/^output\.activation: /)]);
  });

  it('a stride that does not divide the input size', async () => {
    const json = await segmenterJson();
    json.output.stride = 3;
    expect(manifestIssues(json)).toEqual(['output.stride: expected a divisor of the input size 128 x 128']);
  });

  it('a background channel beyond the tensor', async () => {
    const json = await segmenterJson();
    json.output.background_channel = 4;
    expect(manifestIssues(json)).toEqual(['output.background_channel: expected a channel index below 4 (channels plus background)']);
  });

  it('softmax over one channel', async () => {
    const json = await segmenterJson();
    json.output.activation = 'softmax';
    json.output.channels = ['tumor_detected'];
    json.labels = (json.labels as { label: string }[]).filter((l) => l.label === 'tumor_detected');
    (json.recommendations as { rules: unknown[] }).rules = [];
    expect(manifestIssues(json)).toEqual(['output.activation: softmax needs at least two channels (add a background_channel)']);
  });

  it('a missing or negative minimum region, an unbounded region count, an unknown confidence', async () => {
    const json = await segmenterJson();
    delete json.output.min_region_px;
    json.output.min_region_mm2 = -1;
    json.output.max_regions = 100_000;
    json.output.confidence = 'median';
    const paths = manifestIssues(json).map((i) => i.split(':')[0]);
    expect(paths.sort()).toEqual(['output.confidence', 'output.max_regions', 'output.min_region_mm2', 'output.min_region_px']);
  });

  it('a channel without a label entry', async () => {
    const json = await segmenterJson();
    (json.output.channels as string[])[2] = 'fracture_detected';
    expect(manifestIssues(json)).toContain('output.channels[2]: fracture_detected is not in labels');
  });
});
