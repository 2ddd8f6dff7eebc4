/**
 * The training generator's normal anatomy (train.py --normal-anatomy: calcifications, sinuses,
 * vessels, orbits, phantoms.py _draw_distractors) must never change what a series says is a
 * lesion: a model learns "not a lesion" from it only if every truth box stays where the lesion is.
 */
import { describe, expect, it } from 'vitest';
import { MODEL_DIR, python } from './helpers.ts';

type Report = { seed: number; sameTruth: boolean; truthBoxes: number; changedPixels: number };

// Compares each series with and without the added anatomy, slice by slice.
const SCRIPT = `
import json, sys
sys.path.insert(0, sys.argv[1])
import phantoms
out = []
for seed in range(500, 524):
    modality = 'CT' if seed % 2 == 0 else 'MR'
    plain = phantoms.generate_randomized_series(seed, modality, rows=192)
    rich = phantoms.generate_randomized_series(seed, modality, rows=192, normal_anatomy=True)
    truth = lambda s: [(l.label, [(b.slice_index, b.x, b.y, b.width, b.height) for b in l.boxes]) for l in s.lesions]
    out.append({'seed': seed, 'sameTruth': truth(plain) == truth(rich),
                'truthBoxes': sum(len(l.boxes) for l in rich.lesions),
                'changedPixels': int((plain.stored != rich.stored).sum())})
print(json.dumps(out))
`;

describe('phantoms.py normal anatomy for training', () => {
  it('adds structures without moving, growing or hiding any lesion truth box', { timeout: 180_000 }, async () => {
    const { stdout } = await python(['-c', SCRIPT, MODEL_DIR], 170_000);
    const reports = JSON.parse(stdout) as Report[];
    expect(reports).toHaveLength(24);
    for (const r of reports) expect(r.sameTruth, `seed ${r.seed}: truth boxes differ with the added anatomy`).toBe(true);
    // The anatomy is there (it changes pixels in most series) and there are lesions to protect.
    expect(reports.filter((r) => r.changedPixels > 0).length).toBeGreaterThan(12);
    expect(reports.reduce((n, r) => n + r.truthBoxes, 0)).toBeGreaterThan(20);
  });
});
