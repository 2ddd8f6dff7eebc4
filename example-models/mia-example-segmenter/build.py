#!/usr/bin/python3
"""Build mia-example-segmenter: a tiny segmentation model. NOT FOR CLINICAL USE.

It exists to exercise mia's segmentation path (manifest `output.decoding: "segmentation"`,
server/analysis/segmentation.ts) end to end on synthetic head phantoms; it has never seen a
patient image and its output on real scans is meaningless.

  /usr/bin/python3 example-models/mia-example-segmenter/build.py --out example-models/mia-example-segmenter

Debian's interpreter and packages (python3-numpy, python3-torch, python3-onnx). CPU, two threads,
seeded, a fixed number of steps. A run took 15 minutes on a two-core machine shared with other
builds (load 7-11), so expect under five on a quiet one; it writes model.onnx and manifest.json
into --out.

Data: phantoms from models/mia-phantom-detector/phantoms.py, seeds 15,000,000 + i (inside the
generator's training range and apart from the detector's, which uses 10,000,000 + 100,000 * seed
+ i with seed < 50). The generator gives a truth box per slice but no mask, so this script wraps
its lesion planting and takes, per lesion and slice, the pixels the planting changed inside that
slice's truth box: the lesion's core plus whatever oedema or rim falls inside its box.

Model: a small U-Net (encoder from stride 2 to 16, skip connections back to stride 2) on the detector's
input (1 x 128 x 128, the same normalisation, models/mia-phantom-detector/preprocess.py); output
`masks` [N, 3, 64, 64], sigmoid applied, one channel per label. Targets are the masks reduced to
64 x 64 (a cell is positive when at least half of its pixels are).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DETECTOR = os.path.join(HERE, '..', '..', 'models', 'mia-phantom-detector')
sys.path.insert(0, DETECTOR)

import phantoms  # noqa: E402
from preprocess import MODEL_SIZE, preprocess_slice  # noqa: E402

LABELS = phantoms.LABELS
OUT_SIZE = 64
SEED_BASE = 15_000_000
KINDS = ('tumor', 'hemorrhage', 'infarct')


def series_with_masks(seed: int, modality: str, kinds: list[str] | None) -> tuple[Any, np.ndarray]:
    """A phantom series and its per-label masks, (labels, slices, rows, cols) bool."""
    planted: list[tuple[Any, np.ndarray]] = []
    original = phantoms._plant_lesion

    def recording(rng: Any, kind: str, img: np.ndarray, *rest: Any) -> Any:
        before = img.copy()
        lesion = original(rng, kind, img, *rest)
        if lesion is not None:
            planted.append((lesion, img != before))
        return lesion

    phantoms._plant_lesion = recording
    try:
        series = phantoms.generate_series(seed, modality, size=256, kinds=kinds)
    finally:
        phantoms._plant_lesion = original
    masks = np.zeros((len(LABELS),) + series.stored.shape, dtype=bool)
    for lesion, changed in planted:
        channel = LABELS.index(lesion.label)
        for box in lesion.boxes:
            k, x, y = box.slice_index, box.x, box.y
            masks[channel, k, y:y + box.height, x:x + box.width] |= changed[k, y:y + box.height, x:x + box.width]
    return series, masks


def dataset(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Slices with a lesion, and one lesion-free slice in ten, as (inputs, targets)."""
    rng = np.random.default_rng(5)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for i in range(count):
        modality = 'CT' if i % 2 == 0 else 'MR'
        # Mostly one forced kind so each label has examples; a quarter drawn by the generator.
        kinds = None if i % 4 == 3 else [KINDS[i % 3]]
        series, masks = series_with_masks(SEED_BASE + i, modality, kinds)
        values = series.values
        cells = masks.reshape(len(LABELS), values.shape[0], OUT_SIZE, 256 // OUT_SIZE, OUT_SIZE, 256 // OUT_SIZE).mean(axis=(3, 5)) >= 0.5
        for k in range(values.shape[0]):
            positive = bool(cells[:, k].any())
            if not positive and rng.random() > 0.1:
                continue
            xs.append(preprocess_slice(values[k], modality)[None])
            ys.append(cells[:, k].astype(np.float32))
    return np.stack(xs), np.stack(ys)


def make_model(torch: Any) -> Any:
    nn = torch.nn

    # Group normalisation, not batch normalisation: with small batches of correlated slices the
    # running statistics did not match training (an earlier build scored near zero in eval
    # mode), and without any normalisation the net collapsed to "no lesion anywhere".
    def cr(cin: int, cout: int, stride: int = 1, dilation: int = 1, k: int = 3) -> Any:
        pad = dilation if k == 3 else 0
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding=pad, dilation=dilation, bias=False),
                             nn.GroupNorm(4, cout), nn.ReLU(inplace=True))

    class Segmenter(nn.Module):
        """Encoder from stride 2 to stride 16 (a receptive field wider than the largest lesion),
        decoder back to stride 2 with skip connections; the output is at stride 2 (64 x 64)."""

        def __init__(self) -> None:
            super().__init__()
            self.e2 = nn.Sequential(cr(1, 16, 2), cr(16, 16))
            self.e4 = nn.Sequential(cr(16, 32, 2), cr(32, 32))
            self.e8 = nn.Sequential(cr(32, 48, 2), cr(48, 48, dilation=2))
            self.e16 = nn.Sequential(cr(48, 64, 2), cr(64, 64))
            self.d8 = nn.Sequential(cr(48 + 64, 48, k=1), cr(48, 48))
            self.d4 = nn.Sequential(cr(32 + 48, 32, k=1), cr(32, 32))
            self.d2 = nn.Sequential(cr(16 + 32, 16, k=1), cr(16, 16))
            self.head = nn.Conv2d(16, len(LABELS), 1)
            nn.init.constant_(self.head.bias, -3.0)

        def forward(self, x: Any) -> Any:
            up = nn.functional.interpolate
            f2 = self.e2(x)
            f4 = self.e4(f2)
            f8 = self.e8(f4)
            f16 = self.e16(f8)
            g8 = self.d8(torch.cat([f8, up(f16, scale_factor=2.0, mode='nearest')], 1))
            g4 = self.d4(torch.cat([f4, up(g8, scale_factor=2.0, mode='nearest')], 1))
            g2 = self.d2(torch.cat([f2, up(g4, scale_factor=2.0, mode='nearest')], 1))
            return self.head(g2)

    return Segmenter()


def train(torch: Any, xs: np.ndarray, ys: np.ndarray, steps: int) -> Any:
    model = make_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    x_all = torch.from_numpy(xs)
    y_all = torch.from_numpy(ys)
    rng = np.random.default_rng(11)
    start = time.monotonic()
    model.train()
    for step in range(1, steps + 1):
        idx = torch.from_numpy(rng.choice(len(xs), size=8, replace=False))
        x, y = x_all[idx], y_all[idx]
        # Flips and quarter turns: the phantoms' lesions may sit anywhere in the brain.
        if rng.random() < 0.5:
            x, y = x.flip(3), y.flip(3)
        turns = int(rng.integers(4))
        if turns:
            x, y = torch.rot90(x, turns, (2, 3)), torch.rot90(y, turns, (2, 3))
        logits = model(x)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.tensor(10.0))
        # Dice per label over the whole batch: per slice, the many empty label planes rewarded
        # predicting nothing (a build with per-slice Dice learned only the tumour channel).
        p = torch.sigmoid(logits)
        dice = 1 - (2 * (p * y).sum((0, 2, 3)) + 1) / (p.sum((0, 2, 3)) + y.sum((0, 2, 3)) + 1)
        loss = bce + dice.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f'step {step} loss {loss.item():.3f} ({time.monotonic() - start:.0f} s)', flush=True)
    model.eval()
    return model


def validate(torch: Any, model: Any, count: int = 6) -> dict[str, float]:
    """Pixel Dice per label at threshold 0.5 on held-out phantoms (phantoms.py's validation range)."""
    inter = np.zeros(len(LABELS))
    total = np.zeros(len(LABELS))
    for i in range(count):
        modality = 'CT' if i % 2 == 0 else 'MR'
        series, masks = series_with_masks(phantoms.SEED_VALIDATION_BASE + 9000 + i, modality, [KINDS[i % 3]])
        values = series.values
        cells = masks.reshape(len(LABELS), values.shape[0], OUT_SIZE, 256 // OUT_SIZE, OUT_SIZE, 256 // OUT_SIZE).mean(axis=(3, 5)) >= 0.5
        x = torch.from_numpy(np.stack([preprocess_slice(values[k], modality)[None] for k in range(values.shape[0])]))
        with torch.no_grad():
            pred = (torch.sigmoid(model(x)).numpy() >= 0.5).transpose(1, 0, 2, 3)
        inter += (pred & cells).sum(axis=(1, 2, 3))
        total += pred.sum(axis=(1, 2, 3)) + cells.sum(axis=(1, 2, 3))
    return {label: round(float(2 * inter[i] / total[i]), 3) if total[i] > 0 else None for i, label in enumerate(LABELS)}


def export(torch: Any, model: Any, path: str) -> None:
    class Exported(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            return torch.sigmoid(self.model(x))

    dummy = torch.zeros(2, 1, MODEL_SIZE, MODEL_SIZE)
    torch.onnx.export(Exported(), dummy, path, input_names=['input'], output_names=['masks'], opset_version=17,
                      dynamic_axes={'input': {0: 'N'}, 'masks': {0: 'N'}})


def manifest(model_path: str) -> dict[str, Any]:
    detector = json.load(open(os.path.join(DETECTOR, 'manifest.json')))
    data = open(model_path, 'rb').read()
    labels = []
    for entry in detector['labels']:
        labels.append({**entry, 'threshold': 0.5})
    return {
        'manifest_version': 1,
        'id': 'mia-example-segmenter',
        'name': 'mia example segmenter (NOT FOR CLINICAL USE)',
        'version': '0.1.0',
        'file': {'path': 'model.onnx', 'sha256': hashlib.sha256(data).hexdigest(), 'bytes': len(data), 'format': 'onnx', 'opset': 17},
        'intended_use': 'Example of a bring-your-own segmentation model for testing mia on synthetic head phantoms. NOT FOR CLINICAL USE: it has never seen a patient image and its output on real scans is meaningless.',
        'not_for_clinical_use': True,
        'applies_to': detector['applies_to'],
        'input': detector['input'],
        'output': {
            'decoding': 'segmentation',
            'tensor': 'masks',
            'activation': 'sigmoid_applied',
            'stride': MODEL_SIZE // OUT_SIZE,
            'channels': list(LABELS),
            'confidence': 'mean',
            'min_region_px': 40,
            'max_regions': 20,
            'aggregation': {'link_iou': 0.2, 'max_slice_gap': 1},
        },
        'labels': labels,
        'recommendations': detector['recommendations'],
        'training_data': {'description': 'Synthetic head phantoms from models/mia-phantom-detector/phantoms.py (seeds 15,000,000+), masks from the generator\'s planted lesions. No patient data.'},
        'metrics': {
            'source': 'Not measured: an example model for software tests, not evaluated.',
            'per_label': {label: {'sensitivity': None, 'false_positives_per_series': 0} for label in LABELS},
            'false_positives_per_series': 0,
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description='Build mia-example-segmenter (NOT FOR CLINICAL USE).')
    p.add_argument('--out', required=True)
    p.add_argument('--series', type=int, default=150)
    p.add_argument('--steps', type=int, default=900, help='training steps (batches of 8 slices)')
    args = p.parse_args()

    import torch
    torch.manual_seed(3)
    torch.set_num_threads(2)
    t0 = time.monotonic()
    xs, ys = dataset(args.series)
    print(f'{len(xs)} slices, {ys.mean(axis=(0, 2, 3))} positive fraction per label ({time.monotonic() - t0:.0f} s)', flush=True)
    model = train(torch, xs, ys, args.steps)
    print(f'validation Dice at 0.5: {validate(torch, model)}', flush=True)
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, 'model.onnx')
    export(torch, model, model_path)
    with open(os.path.join(args.out, 'manifest.json'), 'w') as fh:
        json.dump(manifest(model_path), fh, indent=2)
        fh.write('\n')
    print(f'wrote {model_path} ({os.path.getsize(model_path)} bytes) in {time.monotonic() - t0:.0f} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
