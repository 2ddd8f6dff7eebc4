#!/usr/bin/python3
"""Evaluate mia-phantom-detector on another phantom generator's series. NOT FOR CLINICAL USE.

The generator is run as a program with the phantoms.py contract (`--out DIR --series N --seed S
--modality both --truth F`), its DICOM files are read back with pydicom (modality values =
stored x RescaleSlope + RescaleIntercept when present), preprocessed with preprocess.py and
scored with train.py's decoding, aggregation and matching, so the figures mean what train.py's
own evaluation means. The held-out family B (eval/heldout-phantoms/generate.py) splits its
seeds: 50_000_000+ tuning (may be looked at), 60_000_000+ test (never trained or tuned on; this
script refuses them unless told --test-split).

  /usr/bin/python3 models/mia-phantom-detector/heldout.py --generator eval/heldout-phantoms/generate.py \\
      --model models/mia-phantom-detector/model.onnx --series 100 [--json out.json]

Adds to train.py's figures a FROC: all labels' findings (decoded at 0.05) pooled and ranked by
confidence, sensitivity over all lesions at the highest confidence cut whose unmatched findings
stay within k false positives per series, k in FROC_RATES.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import phantoms  # noqa: E402
import train  # noqa: E402
from preprocess import preprocess_slice  # noqa: E402

FAMILY_B_TUNING_BASE = 50_000_000
FAMILY_B_TEST_BASE = 60_000_000
FROC_RATES = (0.25, 0.5, 1.0, 2.0)
Predict = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def generate(generator: str, out_dir: str, seed: int, n: int) -> dict[str, Any]:
    truth = os.path.join(out_dir, 'truth.json')
    subprocess.run(['/usr/bin/python3', generator, '--out', out_dir, '--series', str(n), '--seed', str(seed),
                    '--modality', 'both', '--truth', truth], check=True)
    with open(truth) as fh:
        return json.load(fh)


def read_series(out_dir: str) -> dict[str, list[tuple[str, float, np.ndarray]]]:
    """SeriesInstanceUID -> [(SOPInstanceUID, z, modality values)] of every DICOM file under out_dir."""
    import pydicom
    by_series: dict[str, list[tuple[str, float, np.ndarray]]] = {}
    for root, _, files in os.walk(out_dir):
        for f in sorted(files):
            path = os.path.join(root, f)
            try:
                ds = pydicom.dcmread(path)
            except Exception:  # not DICOM (truth.json, sidecars): skip
                continue
            if 'PixelData' not in ds:
                continue
            vals = ds.pixel_array.astype(np.float32)
            if 'RescaleSlope' in ds or 'RescaleIntercept' in ds:
                vals = vals * np.float32(float(ds.get('RescaleSlope', 1.0))) + np.float32(float(ds.get('RescaleIntercept', 0.0)))
            z = float(ds.ImagePositionPatient[2]) if 'ImagePositionPatient' in ds else float(ds.get('InstanceNumber', 0))
            by_series.setdefault(str(ds.SeriesInstanceUID), []).append((str(ds.SOPInstanceUID), z, vals))
    return by_series


def truth_lesions(record: dict[str, Any], slice_of: dict[str, int]) -> list[phantoms.Lesion]:
    """truth.json lesions as phantoms.Lesion, slice indices in the order the series is read."""
    out = []
    for les in record['lesions']:
        boxes = []
        for s in les['slices']:
            k = slice_of.get(s['instance_uid'], s.get('slice_index'))
            b = s['box']
            boxes.append(phantoms.SliceBox(int(k), b['x'], b['y'], b['width'], b['height'], b['width'] * b['height']))
        out.append(phantoms.Lesion(kind=les.get('kind', ''), label=les['label'], center_mm=(0.0, 0.0, 0.0), boxes=boxes))
    return out


def run_generator(predict: Predict, generator: str, seed: int, n: int, work: str) -> list[dict[str, Any]]:
    """train.run_held_out's result shape for n series of an external generator."""
    truth = generate(generator, work, seed, n)
    read = read_series(work)
    results = []
    for rec in truth['series']:
        slices = read.get(rec['scan_uid'])
        if not slices:
            raise ValueError(f"series {rec['scan_uid']} of the truth has no DICOM files")
        order = {u: i for i, u in enumerate(rec.get('instance_uids') or [])}
        slices.sort(key=lambda s: (order.get(s[0], 1 << 30), s[1]))
        modality = rec['modality']
        vals = np.stack([s[2] for s in slices])
        x = np.stack([preprocess_slice(v, modality) for v in vals])
        heat, size, off = predict(x)
        slice_of = {s[0]: i for i, s in enumerate(slices)}
        results.append({'seed': rec.get('seed'), 'modality': modality, 'rows': vals.shape[1], 'cols': vals.shape[2],
                        'heat': heat, 'size': size, 'offset': off, 'lesions': truth_lesions(rec, slice_of)})
    return results


def froc(results: list[dict[str, Any]]) -> dict[str, Any]:
    low = [train.AP_DECODE_THRESHOLD] * len(train.LABELS)
    pairs: list[tuple[float, bool]] = []
    n_les = 0
    for s in results:
        fs = train.findings_for(s, low)
        tp, _ = train.match(s, fs)
        pairs.extend((f['confidence'], t) for f, t in zip(fs, tp))
        n_les += len(s['lesions'])
    pairs.sort(key=lambda p: -p[0])
    n = len(results)
    points = {}
    for rate in FROC_RATES:
        tps = fps = 0
        best = {'sensitivity': 0.0, 'threshold': None, 'false_positives_per_series': 0.0}
        for conf, hit in pairs:
            tps, fps = tps + int(hit), fps + int(not hit)
            if fps > rate * n:
                break
            best = {'sensitivity': round(tps / max(n_les, 1), 4), 'threshold': round(conf, 4),
                    'false_positives_per_series': round(fps / n, 4)}
        points[str(rate)] = best
    return {'lesions': n_les, 'series': n, 'points': points}


READER_HIT_IOU = 0.3


def _reader_hits(f: dict[str, Any], les: phantoms.Lesion) -> bool:
    """npm run eval's rule (scripts/eval/matching.ts): same label, key slice on or next to one of
    the lesion's slices, and there the box's centre inside the truth box or IoU >= 0.3."""
    if train.LABELS.index(les.label) != f['label']:
        return False
    x, y, w, h = f['box']
    cx, cy = x + w / 2, y + h / 2
    for b in les.boxes:
        if abs(b.slice_index - f['slice']) > 1:
            continue
        tb = [b.x, b.y, b.width, b.height]
        if (b.x <= cx <= b.x + b.width and b.y <= cy <= b.y + b.height) or train.iou(f['box'], tb) >= READER_HIT_IOU:
            return True
    return False


def reader_froc(results: list[dict[str, Any]]) -> dict[str, Any]:
    """FROC under npm run eval's matching (scripts/eval/froc.ts): a lesion counts at its first
    (most confident) hit, later hits on it are duplicates (neither hit nor false positive)."""
    low = [train.AP_DECODE_THRESHOLD] * len(train.LABELS)
    events: list[tuple[float, bool]] = []
    n_les = 0
    per_modality: dict[str, list[Any]] = {}
    for s in results:
        fs = train.findings_for(s, low)
        found = [False] * len(s['lesions'])
        n_les += len(s['lesions'])
        mod = per_modality.setdefault(s['modality'], [0, 0, []])
        mod[0] += 1
        mod[1] += len(s['lesions'])
        for f in fs:  # most confident first
            hit_any, new = False, -1
            for i, les in enumerate(s['lesions']):
                if _reader_hits(f, les):
                    hit_any = True
                    if not found[i]:
                        new = i
                        break
            if new >= 0:
                found[new] = True
                events.append((f['confidence'], True))
                mod[2].append((f['confidence'], True))
            elif not hit_any:
                events.append((f['confidence'], False))
                mod[2].append((f['confidence'], False))

    def table(ev: list[tuple[float, bool]], lesions: int, series: int) -> dict[str, float]:
        ev = sorted(ev, key=lambda e: -e[0])
        tp = fp = 0
        best = {str(r): 0.0 for r in FROC_RATES}
        for i, (conf, hit) in enumerate(ev):
            tp, fp = tp + int(hit), fp + int(not hit)
            if i + 1 < len(ev) and ev[i + 1][0] == conf:
                continue
            for r in FROC_RATES:
                if fp / max(series, 1) <= r + 1e-12:
                    best[str(r)] = max(best[str(r)], round(tp / max(lesions, 1), 4))
        return best

    return {'rule': 'npm run eval (centre in box or IoU >= 0.3, key slice +-1, duplicates ignored)',
            'lesions': n_les, 'series': len(results), 'sensitivity_at_fp_per_series': table(events, n_les, len(results)),
            'by_modality': {m: {'series': v[0], 'lesions': v[1], 'sensitivity_at_fp_per_series': table(v[2], v[1], v[0])}
                            for m, v in per_modality.items()}}


def evaluate(results: list[dict[str, Any]], thresholds: list[float]) -> dict[str, Any]:
    """FROC, operating point at the given thresholds (per label and modality), AP, calibration."""
    op = train.operating_point(results, thresholds)
    aps, pairs = train.average_precision(results)
    by_modality: dict[str, dict[str, int]] = {}
    for s in results:
        m = by_modality.setdefault(s['modality'], {'lesions': 0, 'missed': 0})
        m['lesions'] += len(s['lesions'])
    for lab in train.LABELS:
        for mod, missed in op['per_label'][lab]['missed_by_modality'].items():
            by_modality.setdefault(mod, {'lesions': 0, 'missed': 0})['missed'] += missed
    for m in by_modality.values():
        m['sensitivity'] = round(1 - m['missed'] / m['lesions'], 4) if m['lesions'] else None
    return {'froc': froc(results), 'reader_froc': reader_froc(results), 'operating_point': op, 'sensitivity_by_modality': by_modality,
            'average_precision_iou_0_5': aps, 'calibration': train.calibration(pairs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description='Score the detector on an external phantom generator (NOT FOR CLINICAL USE).')
    p.add_argument('--generator', required=True)
    p.add_argument('--model', required=True, help='model.onnx')
    p.add_argument('--manifest', default=None, help='thresholds from here (default: beside the model)')
    p.add_argument('--series', type=int, default=100)
    p.add_argument('--seed', type=int, default=FAMILY_B_TUNING_BASE)
    p.add_argument('--test-split', action='store_true', help='allow seeds of the test split (final report only)')
    p.add_argument('--json', default=None)
    args = p.parse_args(argv)
    if args.seed + args.series > FAMILY_B_TEST_BASE and not args.test_split:
        p.error(f'seeds from {FAMILY_B_TEST_BASE} are the test split; pass --test-split only for the final report')
    import torch
    torch.set_num_threads(2)
    import onnx_torch
    manifest = args.manifest or os.path.join(os.path.dirname(os.path.abspath(args.model)), 'manifest.json')
    with open(manifest) as fh:
        labels = {lab['label']: lab['threshold'] for lab in json.load(fh)['labels']}
    thresholds = [labels[lab] for lab in train.LABELS]
    with tempfile.TemporaryDirectory(prefix='mia-heldout-') as work:
        results = run_generator(onnx_torch.predictor(args.model), args.generator, args.seed, args.series, work)
    ev = evaluate(results, thresholds)
    ev['generator'] = args.generator
    ev['seeds'] = [args.seed, args.seed + args.series - 1]
    ev['model'] = args.model
    ev['thresholds'] = dict(zip(train.LABELS, thresholds))
    print(json.dumps({'froc': ev['froc'], 'reader_froc': ev['reader_froc'], 'by_modality': ev['sensitivity_by_modality'], 'ap': ev['average_precision_iou_0_5'],
                      'ece': ev['calibration']['expected_calibration_error'],
                      'sensitivity': {k: v['sensitivity'] for k, v in ev['operating_point']['per_label'].items()},
                      'fp_per_series': ev['operating_point']['false_positives_per_series']}, indent=1))
    if args.json:
        with open(args.json, 'w') as fh:
            json.dump(ev, fh, indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(main())
