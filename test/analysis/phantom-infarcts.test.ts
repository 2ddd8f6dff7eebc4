/**
 * The training generator's territorial infarcts (train.py --territorial-infarcts, phantoms.py
 * _territorial): infarcts drawn as wedges that widen to the cortex and stop at the midline, or as
 * subtle changes of the tissue under them. A controlled training comparison needs everything else
 * of a series as it was: every tumour and haemorrhage, where it is and what it looks like.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { MODEL_DIR, python } from './helpers.ts';

type Report = {
  seed: number;
  othersSame: boolean;
  infarcts: number;
  infarctsMoved: number;
  wedges: number;
  wedgeCrossesMidline: number;
  wedgeWiderOutside: number;
};

// Compares each series with and without the flag, then draws wedges for lesions placed about the
// head and checks their shape in the head frame.
const SCRIPT = `
import json, math, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import phantoms
out = []
for seed in range(700, 712):
    modality = 'CT' if seed % 2 == 0 else 'MR'
    kinds = ['infarct', 'tumor', 'infarct'] if seed % 3 else ['infarct', 'hemorrhage']
    plain = phantoms.generate_randomized_series(seed, modality, rows=128, kinds=kinds)
    terr = phantoms.generate_randomized_series(seed, modality, rows=128, kinds=kinds, territorial_infarcts=True)
    boxes = lambda l: [(b.slice_index, b.x, b.y, b.width, b.height) for b in l.boxes]
    others = lambda s: [(l.label, boxes(l)) for l in s.lesions if l.label != 'infarct_detected']
    inf_plain = {l.center_mm: boxes(l) for l in plain.lesions if l.label == 'infarct_detected'}
    inf_terr = [l for l in terr.lesions if l.label == 'infarct_detected']
    # Each wedge in the head frame, on the plane through its apex: no part on the other side of
    # the midline, and wider far from the apex than near it.
    wedges, crosses, wider = 0, 0, 0
    rng = np.random.default_rng([seed, phantoms.INFARCT_STREAM])
    u, v = np.meshgrid(np.linspace(-90, 90, 361), np.linspace(-110, 110, 441))
    for c in ([30.0, 40.0, 10.0], [-45.0, -20.0, 0.0], [5.0, 60.0, 20.0], [-20.0, -70.0, 5.0]):
        les = phantoms._RandLesion(kind='infarct', center=np.array(c), semi=np.array([10.0, 15.0, 8.0]), phi=0.0,
                                   outline=phantoms._Field(rng, 20.0), outline_amp=0.0, lobes=[],
                                   texture=phantoms._Field(rng, 8.0), texture_amp=0.0,
                                   values={'core': 0.0, 'inner': 0.0, 'shell': 0.0}, inner_q=0.0, shell_factor=0.0,
                                   dark_rim_q=0.0)
        phantoms._territorial(rng, les, modality)
        if les.wedge is None:
            continue
        w = les.wedge
        inside = w.q(u, v, 0.0, les.semi[2]) < 1.0
        wedges += 1
        crosses += int(bool((inside & (u * w.side < 0)).any()))
        along = (u - w.apex[0]) * w.axis[0] + (v - w.apex[1]) * w.axis[1]
        near, far = inside & (along > 5) & (along < 15), inside & (along > 30) & (along < 40)
        wider += int(far.sum() > 2 * near.sum() > 0)
    out.append({'seed': seed, 'othersSame': others(plain) == others(terr), 'infarcts': len(inf_terr),
                'infarctsMoved': sum(1 for l in inf_terr if inf_plain.get(l.center_mm) != boxes(l)),
                'wedges': wedges, 'wedgeCrossesMidline': crosses, 'wedgeWiderOutside': wider})
print(json.dumps(out))
`;

describe('phantoms.py territorial infarcts for training', () => {
  let reports: Report[] = [];
  beforeAll(async () => {
    const { stdout } = await python(['-c', SCRIPT, MODEL_DIR], 170_000);
    reports = JSON.parse(stdout) as Report[];
  }, 180_000);

  it('reshapes infarcts only, never moving a tumour or haemorrhage truth box', () => {
    expect(reports).toHaveLength(12);
    for (const r of reports) expect(r.othersSame, `seed ${r.seed}: a tumour or haemorrhage changed`).toBe(true);
    const infarcts = reports.reduce((n, r) => n + r.infarcts, 0);
    expect(infarcts).toBeGreaterThan(10);
    expect(reports.reduce((n, r) => n + r.infarctsMoved, 0)).toBeGreaterThan(infarcts / 3);
  });

  it('draws territorial wedges that stay on their side of the midline and widen towards the cortex', () => {
    const wedges = reports.reduce((n, r) => n + r.wedges, 0);
    expect(wedges).toBeGreaterThan(10);
    expect(reports.reduce((n, r) => n + r.wedgeCrossesMidline, 0)).toBe(0);
    expect(reports.reduce((n, r) => n + r.wedgeWiderOutside, 0)).toBe(wedges);
  });
});
