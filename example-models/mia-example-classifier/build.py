#!/usr/bin/python3
"""Builds mia-example-classifier: a tiny per-slice "lesion present" classifier. NOT FOR CLINICAL USE.

It exists to exercise mia's `decoding: 'classifier'` path end to end. One output tensor
`scores`, [N, 2]: softmax-applied probabilities of (background, lesion present) per slice. No
box: mia reports the series score (max over slices) on the key slice as an image-level finding.
Trained for a minute or two on phantom series (phantom_data.py).

  /usr/bin/python3 example-models/mia-example-classifier/build.py [--series 160] [--epochs 12]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
import phantom_data as pd  # noqa: E402

LABEL = 'lesion_present'


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--series', type=int, default=160)
    ap.add_argument('--epochs', type=int, default=12)
    ap.add_argument('--out', default=HERE)
    args = ap.parse_args()
    import torch
    torch.manual_seed(2)
    torch.set_num_threads(1)
    t0 = time.time()
    x, boxes = pd.slices_and_boxes(args.series, seed=2)
    y = np.array([1 if bs else 0 for bs in boxes], np.int64)
    print(f'{len(x)} slices, {int(y.sum())} with a lesion ({time.time() - t0:.0f}s)', flush=True)

    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = pd.backbone(torch)
            self.head = nn.Conv2d(32, 2, 1)

        def forward(self, v):
            # Max over the grid: "is there a lesion anywhere on this slice".
            return torch.amax(self.head(self.body(v)), dim=(2, 3))

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    for epoch in range(args.epochs):
        perm = torch.randperm(len(X))
        total, right = 0.0, 0
        for s in range(0, len(X), 64):
            idx = perm[s:s + 64]
            out = net(X[idx])
            loss = nn.functional.cross_entropy(out, Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
            right += int((out.argmax(1) == Y[idx]).sum())
        print(f'epoch {epoch + 1}: loss {total / len(X):.4f}, training accuracy {right / len(X):.3f} ({time.time() - t0:.0f}s)', flush=True)

    class Export(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, v):
            return torch.softmax(self.net(v), dim=1)

    net.eval()
    model_path = os.path.join(args.out, 'model.onnx')
    torch.onnx.export(Export(), torch.zeros(1, 1, pd.SIZE, pd.SIZE), model_path, input_names=['input'], output_names=['scores'],
                      dynamic_axes={'input': {0: 'N'}, 'scores': {0: 'N'}}, opset_version=17)
    manifest = {
        'manifest_version': 1,
        'id': 'mia-example-classifier',
        'name': 'mia example slice classifier (NOT FOR CLINICAL USE)',
        'version': '0.1.0',
        'file': pd.file_entry(model_path),
        'intended_use': 'Example of a bring-your-own 2D classifier for testing mia on synthetic phantoms only. NOT FOR CLINICAL USE: it has never seen a patient image.',
        'not_for_clinical_use': True,
        'applies_to': pd.applies_to(),
        'input': pd.input_spec(),
        'output': {
            'decoding': 'classifier',
            'tensor': 'scores',
            'score_activation': 'softmax_applied',
            'background_index': 0,
            'channels': [LABEL],
        },
        'labels': [pd.lesion_label(LABEL, 'Lesion present (example model)', 'Some slice of the series shows a phantom lesion. Example model, not for clinical use.')],
        'recommendations': {
            'rules': [{'label': LABEL, 'min_confidence': 0.5, 'text': 'Example model scored a possible lesion in this series: not for clinical use.'}],
            'none_found': 'Example model found nothing. Not for clinical use.',
        },
        'training_data': pd.training_data(args.series, len(x), 'example-models/mia-example-classifier/build.py', args.epochs),
        'metrics': pd.UNEVALUATED,
    }
    pd.write_manifest(args.out, manifest, model_path, t0)
    return 0


if __name__ == '__main__':
    sys.exit(main())
