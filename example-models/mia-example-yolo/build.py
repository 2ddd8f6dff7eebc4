#!/usr/bin/python3
"""Builds mia-example-yolo: a tiny YOLO-style single-class detector. NOT FOR CLINICAL USE.

It exists to exercise mia's `decoding: 'yolo'` path end to end. One output tensor `boxes`,
[N, K, 4 + 1 + C] (K = 64 grid cells of an 8 x 8 grid at stride 8; per cell cx, cy, w, h in
model-input pixels, objectness, one class score, both sigmoid-applied), the YOLOv5-style layout.
Trained for a few minutes on phantom series (phantom_data.py): it finds obvious phantom lesions
and nothing else.

  /usr/bin/python3 example-models/mia-example-yolo/build.py [--series 160] [--epochs 30]
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

GRID = 8
STRIDE = pd.SIZE // GRID
LABEL = 'lesion_detected'


def targets(boxes: list[list[list[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """Objectness (n, GRID, GRID) and box targets (n, 4, GRID, GRID): the cell holding a box's
    centre is responsible for it (the larger box wins a shared cell)."""
    n = len(boxes)
    obj = np.zeros((n, GRID, GRID), np.float32)
    box = np.zeros((n, 4, GRID, GRID), np.float32)
    for i, bs in enumerate(boxes):
        for cx, cy, w, h in sorted(bs, key=lambda b: b[2] * b[3]):
            gx, gy = min(int(cx * GRID), GRID - 1), min(int(cy * GRID), GRID - 1)
            obj[i, gy, gx] = 1.0
            box[i, :, gy, gx] = [cx * GRID - gx, cy * GRID - gy, w, h]
    return obj, box


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--series', type=int, default=160)
    ap.add_argument('--epochs', type=int, default=30)
    ap.add_argument('--out', default=HERE)
    args = ap.parse_args()
    import torch
    torch.manual_seed(1)
    torch.set_num_threads(1)
    t0 = time.time()
    x, boxes = pd.slices_and_boxes(args.series, seed=1)
    obj_t, box_t = targets(boxes)
    print(f'{len(x)} slices, {int(obj_t.sum())} boxes ({time.time() - t0:.0f}s)', flush=True)

    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = pd.backbone(torch)
            self.head = nn.Conv2d(32, 6, 1)  # tx, ty, tw, th, objectness, class

        def forward(self, v):
            return self.head(self.body(v))

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    X, O, B = torch.from_numpy(x), torch.from_numpy(obj_t), torch.from_numpy(box_t)
    bce = nn.functional.binary_cross_entropy_with_logits
    for epoch in range(args.epochs):
        perm = torch.randperm(len(X))
        total = 0.0
        for s in range(0, len(X), 64):
            idx = perm[s:s + 64]
            out = net(X[idx])
            o, b = O[idx], B[idx]
            pos = o.sum().clamp(min=1.0)
            l_obj = bce(out[:, 4], o, pos_weight=torch.tensor(8.0))
            pred = torch.sigmoid(out[:, :4])
            l_box = (torch.abs(pred - b).sum(1) * o).sum() / pos
            l_cls = (bce(out[:, 5], torch.ones_like(o), reduction='none') * o).sum() / pos
            loss = l_obj + 2.0 * l_box + l_cls
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        print(f'epoch {epoch + 1}: loss {total / len(X):.4f} ({time.time() - t0:.0f}s)', flush=True)

    class Export(nn.Module):
        """Grid outputs -> [N, K, 6]: cx, cy, w, h in model-input pixels, objectness, class."""

        def __init__(self) -> None:
            super().__init__()
            self.net = net
            gy, gx = torch.meshgrid(torch.arange(GRID, dtype=torch.float32), torch.arange(GRID, dtype=torch.float32), indexing='ij')
            self.register_buffer('gx', gx.reshape(1, 1, GRID, GRID))
            self.register_buffer('gy', gy.reshape(1, 1, GRID, GRID))

        def forward(self, v):
            t = torch.sigmoid(self.net(v))
            cx = (self.gx + t[:, 0:1]) * STRIDE
            cy = (self.gy + t[:, 1:2]) * STRIDE
            w = t[:, 2:3] * pd.SIZE
            h = t[:, 3:4] * pd.SIZE
            out = torch.cat([cx, cy, w, h, t[:, 4:6]], 1)
            return out.flatten(2).transpose(1, 2)

    net.eval()
    model_path = os.path.join(args.out, 'model.onnx')
    torch.onnx.export(Export(), torch.zeros(1, 1, pd.SIZE, pd.SIZE), model_path, input_names=['input'], output_names=['boxes'],
                      dynamic_axes={'input': {0: 'N'}, 'boxes': {0: 'N'}}, opset_version=17)
    manifest = {
        'manifest_version': 1,
        'id': 'mia-example-yolo',
        'name': 'mia example YOLO-style detector (NOT FOR CLINICAL USE)',
        'version': '0.1.0',
        'file': pd.file_entry(model_path),
        'intended_use': 'Example of a bring-your-own YOLO-style detector for testing mia on synthetic phantoms only. NOT FOR CLINICAL USE: it has never seen a patient image.',
        'not_for_clinical_use': True,
        'applies_to': pd.applies_to(),
        'input': pd.input_spec(),
        'output': {
            'decoding': 'yolo',
            'tensor': 'boxes',
            'layout': 'boxes_last',
            'box_format': 'cxcywh',
            'box_units': 'input_pixels',
            'objectness': True,
            'score_activation': 'sigmoid_applied',
            'channels': [LABEL],
            'nms_iou': 0.4,
            'max_detections': 10,
            'class_agnostic_nms': False,
            'aggregation': {'link_iou': 0.2, 'max_slice_gap': 1},
        },
        'labels': [pd.lesion_label(LABEL)],
        'recommendations': {
            'rules': [{'label': LABEL, 'min_confidence': 0.5, 'text': 'Example model flagged a possible lesion: not for clinical use.'}],
            'none_found': 'Example model found nothing. Not for clinical use.',
        },
        'training_data': pd.training_data(args.series, len(x), 'example-models/mia-example-yolo/build.py', args.epochs),
        'metrics': pd.UNEVALUATED,
    }
    pd.write_manifest(args.out, manifest, model_path, t0)
    return 0


if __name__ == '__main__':
    sys.exit(main())
