"""Model-input preprocessing for mia-phantom-detector, numpy only.

This is the reference that server/analysis/preprocess.ts reproduces operation for operation
(a parity test in test/analysis compares the two), so keep every step explicit:

1. Normalise the slice's modality values (HU for CT, stored values for MR) to 0..1:
   - CT: window, (v - (center - width/2)) / width with center 40, width 80 (brain window).
   - MR: (v - p_lo) / (p_hi - p_lo) with p_lo, p_hi the 1st and 99.5th percentiles of the
     slice, numpy's default 'linear' percentile (index = q/100 * (n-1), interpolate).
     A flat slice (p_hi - p_lo < 1e-6) maps to zeros.
   Then clip to [0, 1] and round to float32.
2. Resize to 128 x 128 by bilinear interpolation with half-pixel centres and edge clamping
   (src = (dst + 0.5) * in/out - 0.5, clamped to [0, in-1]); no antialiasing. Arithmetic in
   float64, result rounded to float32.

Box coordinates scale linearly between the two grids: with half-pixel centres, a continuous
edge coordinate e in the original image is e * out/in in the model grid.
"""

from __future__ import annotations

import numpy as np

MODEL_SIZE = 128
CT_WINDOW_CENTER = 40.0
CT_WINDOW_WIDTH = 80.0
MR_PERCENTILES = (1.0, 99.5)


def normalise(values: np.ndarray, modality: str) -> np.ndarray:
    v = values.astype(np.float64)
    if modality == 'CT':
        lo = CT_WINDOW_CENTER - CT_WINDOW_WIDTH / 2
        out = (v - lo) / CT_WINDOW_WIDTH
    elif modality == 'MR':
        p_lo, p_hi = np.percentile(v, MR_PERCENTILES)
        span = p_hi - p_lo
        out = np.zeros_like(v) if span < 1e-6 else (v - p_lo) / span
    else:
        raise ValueError(f'unsupported modality {modality!r}')
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0.0, n_in - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0


def resize_bilinear(img: np.ndarray, out_h: int = MODEL_SIZE, out_w: int = MODEL_SIZE) -> np.ndarray:
    h, w = img.shape
    y0, y1, wy = _axis(h, out_h)
    x0, x1, wx = _axis(w, out_w)
    a = img.astype(np.float64)
    wx_ = wx[None, :]
    top = a[y0][:, x0] * (1 - wx_) + a[y0][:, x1] * wx_
    bottom = a[y1][:, x0] * (1 - wx_) + a[y1][:, x1] * wx_
    return (top * (1 - wy[:, None]) + bottom * wy[:, None]).astype(np.float32)


def preprocess_slice(values: np.ndarray, modality: str) -> np.ndarray:
    """(rows, cols) modality values -> (128, 128) float32 model input."""
    return resize_bilinear(normalise(values, modality))
