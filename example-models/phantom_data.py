"""Training data for the example models: phantom series from models/mia-phantom-detector.

NOT FOR CLINICAL USE. Shared by example-models/*/build.py; each model is a toy that shows a
model shape mia can run (see docs, "Bring your own model"), not a detector anyone should trust.

Slices are preprocessed exactly as the example manifests declare (CT window 40/80, MR 1st-99.5th
percentile, clip 0..1, bilinear half-pixel resize to SIZE x SIZE), through the reference
preprocess.py that server/analysis/preprocess.ts reproduces.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'models', 'mia-phantom-detector'))

import phantoms  # noqa: E402
from preprocess import normalise, resize_bilinear  # noqa: E402

SIZE = 64
# Seeds of their own, apart from the bundled detector's train/test/validation ranges.
SEED_BASE = 40_000_000


def slices_and_boxes(n_series: int, seed: int) -> tuple[np.ndarray, list[list[list[float]]]]:
    """(n, 1, SIZE, SIZE) inputs and per-slice truth boxes [cx, cy, w, h], normalised 0..1."""
    rng = np.random.default_rng(seed)
    xs: list[np.ndarray] = []
    boxes: list[list[list[float]]] = []
    for i in range(n_series):
        modality = 'CT' if rng.random() < 0.5 else 'MR'
        size = int(rng.choice([128, 256]))
        s = phantoms.generate_series(SEED_BASE + 1000 * seed + i, modality, size=size)
        vals = s.values
        n, rows, cols = vals.shape
        xs.append(np.stack([resize_bilinear(normalise(vals[k], modality), SIZE, SIZE) for k in range(n)])[:, None])
        per = [[] for _ in range(n)]
        for les in s.lesions:
            for b in les.boxes:
                per[b.slice_index].append([(b.x + b.width / 2) / cols, (b.y + b.height / 2) / rows, b.width / cols, b.height / rows])
        boxes.extend(per)
    return np.concatenate(xs).astype(np.float32), boxes


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        h.update(f.read())
    return h.hexdigest()


def input_spec() -> dict:
    return {
        'tensor': 'input',
        'shape': ['N', 1, SIZE, SIZE],
        'dtype': 'float32',
        'channels': 1,
        'size': {'height': SIZE, 'width': SIZE},
        'resampling': {'method': 'bilinear', 'align': 'half_pixel', 'antialias': False, 'keep_aspect': False},
        'normalisation': {
            'CT': {'kind': 'window', 'center': 40.0, 'width': 80.0, 'clip': [0, 1]},
            'MR': {'kind': 'percentile', 'low': 1.0, 'high': 99.5, 'clip': [0, 1]},
        },
        'order': 'normalise_then_resize',
    }


def file_entry(model_path: str) -> dict:
    return {'path': 'model.onnx', 'sha256': sha256_file(model_path), 'bytes': os.path.getsize(model_path), 'format': 'onnx', 'opset': 17}


def lesion_label(label: str, display_name: str = 'Lesion (example model)',
                 definition: str = 'Any phantom lesion (tumour, haemorrhage or infarct). Example model, not for clinical use.') -> dict:
    """The one label of the example models: a phantom lesion."""
    return {
        'label': label,
        'display_name': display_name,
        'definition': definition,
        'code': {'system': 'SNOMED CT', 'value': '52988006', 'meaning': 'Lesion', 'provisional': True},
        'threshold': 0.5,
        'urgency': 'routine',
    }


def training_data(series: int, slices: int, script: str, epochs: int) -> dict:
    return {
        'description': f'{series} synthetic phantom series (phantom_data.py, models/mia-phantom-detector/phantoms.py), {slices} slices. No patient data.',
        'command': f'/usr/bin/python3 {script}',
        'epochs': epochs,
    }


UNEVALUATED = {'source': 'none: an example model, not evaluated', 'per_label': {}, 'false_positives_per_series': 0}


def write_manifest(out: str, manifest: dict, model_path: str, started: float) -> None:
    with open(os.path.join(out, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=2)
        f.write('\n')
    print(f'wrote {model_path} ({os.path.getsize(model_path)} bytes) in {time.time() - started:.0f}s')


def applies_to() -> dict:
    return {'modalities': ['CT', 'MR'], 'body_part': 'HEAD', 'min_slices': 3, 'image_types': ['ORIGINAL', 'DERIVED']}


def backbone(torch):
    """Four stride-2 conv blocks: 64 -> 4 ... a few thousand weights, trains in a minute."""
    nn = torch.nn

    def cbr(cin: int, cout: int, stride: int) -> object:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    return nn.Sequential(cbr(1, 16, 2), cbr(16, 24, 2), cbr(24, 32, 2), cbr(32, 32, 1))
