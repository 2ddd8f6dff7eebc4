#!/usr/bin/python3
"""Synthetic MR and CT head phantom series for the mia-phantom-detector model.

NOT FOR CLINICAL USE. These are geometric toys: ellipsoid skull, brain, ventricles and three
kinds of lesion, with noise and random variation. They exist so that the bundled model can be
trained, evaluated and tested end to end without any patient data.

Every series is a pure function of its integer seed (numpy PCG64), so a series can be
regenerated bit for bit on any machine. Seeds >= 10_000_000 are reserved for the training
script (train.py); evaluation uses 20_000_000+ and validation 30_000_000+ (see SEED_* below).

Geometry: a series is a stack of axial slices, shape (slices, rows, cols). Pixel (r, c) has its
centre at x = (c - (cols-1)/2) * spacing (patient left is +x in DICOM LPS, we do not care about
laterality here), y likewise, and slice k at z = z0 + k * thickness. Ground-truth boxes are in
pixel units of the slice, origin top-left: x = first column, y = first row, width/height = count
of columns/rows covered (so the box's continuous extent is [x, x+width) x [y, y+height)).

CLI:
  /usr/bin/python3 phantoms.py --out DIR --series N --seed S [--modality MR|CT|both]
      [--truth truth.json] [--size 256] [--kinds tumor,hemorrhage|none] [--raw RAWDIR] [--randomize]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import sys
import uuid
from typing import Any

import numpy as np

LABELS: tuple[str, ...] = ('tumor_detected', 'hemorrhage_detected', 'infarct_detected')
KIND_TO_LABEL = {'tumor': 'tumor_detected', 'hemorrhage': 'hemorrhage_detected', 'infarct': 'infarct_detected'}

SEED_TRAIN_BASE = 10_000_000
SEED_TEST_BASE = 20_000_000
SEED_VALIDATION_BASE = 30_000_000

# DICOM constants. Explicit VR little endian and the two storage SOP classes we emit.
EXPLICIT_VR_LE = '1.2.840.10008.1.2.1'
CT_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.2'
MR_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.4'
# Implementation Class UID: a UUID-derived UID (PS3.5 B.2) that never changes for this generator.
IMPLEMENTATION_CLASS_UID = '2.25.' + str(uuid.UUID('6d1a0c2e-4f3b-4c55-9a0e-7d5f3c1b2a90').int)
IMPLEMENTATION_VERSION = 'MIA_PHANTOM_1'

# Minimum cross-section for a slice to carry a truth box: an equivalent diameter of 6 mm.
# Below that a lesion is a partial-volume sliver that no reader would box on that slice.
MIN_TRUTH_AREA_MM2 = math.pi * 3.0 * 3.0


@dataclasses.dataclass
class SliceBox:
    slice_index: int
    x: int
    y: int
    width: int
    height: int
    area_px: int


@dataclasses.dataclass
class Lesion:
    kind: str  # tumor | hemorrhage | infarct
    label: str
    center_mm: tuple[float, float, float]
    boxes: list[SliceBox]

    def key_box(self) -> SliceBox:
        """The slice with the largest cross-section: the one a reader would point at."""
        return max(self.boxes, key=lambda b: (b.area_px, -b.slice_index))


@dataclasses.dataclass
class Series:
    seed: int
    modality: str  # CT | MR
    stored: np.ndarray  # uint16, (slices, rows, cols): the DICOM stored pixel values
    slope: float
    intercept: float
    pixel_spacing_mm: float
    slice_thickness_mm: float
    z0_mm: float
    window_center: float
    window_width: float
    lesions: list[Lesion]

    @property
    def values(self) -> np.ndarray:
        """Modality values (HU for CT) as float32, exactly stored * slope + intercept."""
        return (self.stored.astype(np.float32) * np.float32(self.slope) + np.float32(self.intercept)).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Smooth random fields: a few random 3D cosines. Cheap, deterministic and band-limited, used to
# make tissue boundaries and lesion outlines irregular and to give MR a bias field.


def _smooth_field(rng: np.random.Generator, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                  wavelength_mm: float, terms: int = 4) -> np.ndarray:
    out = np.zeros(np.broadcast_shapes(x.shape, y.shape, z.shape), dtype=np.float32)
    for _ in range(terms):
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction) + 1e-9
        k = 2 * math.pi / (wavelength_mm * rng.uniform(0.7, 1.4))
        phase = rng.uniform(0, 2 * math.pi)
        out += np.cos(k * (direction[0] * x + direction[1] * y + direction[2] * z) + phase).astype(np.float32)
    return out / math.sqrt(terms / 2.0)


def _uid(*parts: object) -> str:
    """A deterministic 2.25 UID (PS3.5 B.2) from a hash of the parts, so reruns give equal UIDs."""
    digest = hashlib.sha256('|'.join(str(p) for p in parts).encode()).digest()[:16]
    return '2.25.' + str(uuid.UUID(bytes=digest).int)


# ---------------------------------------------------------------------------------------------
# Tissue values. CT in HU; MR in arbitrary units of a FLAIR-like contrast (CSF dark, lesions
# bright), later multiplied by a random scanner gain and bias field.

CT_VALUES = {'air': -1000.0, 'scalp': 35.0, 'bone': 1100.0, 'csf': 8.0, 'gm': 40.0, 'wm': 29.0}
MR_VALUES = {'air': 4.0, 'scalp': 700.0, 'bone': 60.0, 'csf': 140.0, 'gm': 640.0, 'wm': 500.0}


def generate_series(seed: int, modality: str, size: int = 256, kinds: list[str] | None = None,
                    n_slices: int | None = None) -> Series:
    """One phantom series. `kinds` forces the lesion kinds (empty list: lesion-free); by default
    the seed draws 0-2 lesions (about a quarter of series are lesion-free)."""
    if modality not in ('CT', 'MR'):
        raise ValueError(f'modality must be CT or MR, got {modality!r}')
    rng = np.random.default_rng(seed)
    fov_mm = rng.uniform(215.0, 245.0)
    spacing = fov_mm / size
    thickness = 5.0
    if n_slices is None:
        n_slices = int(rng.integers(18, 27))

    # Head ellipsoid (semi-axes in mm), in-plane rotation and offset.
    a_head = rng.uniform(68.0, 80.0)
    b_head = rng.uniform(86.0, 100.0)
    c_head = rng.uniform(72.0, 82.0)
    theta = math.radians(rng.uniform(-12.0, 12.0))
    off_x, off_y = rng.uniform(-10.0, 10.0, size=2)
    z0 = rng.uniform(-42.0, -30.0)

    coords = (np.arange(size, dtype=np.float32) - (size - 1) / 2.0) * spacing
    zs = (z0 + np.arange(n_slices, dtype=np.float32) * thickness).astype(np.float32)
    z = zs[:, None, None]
    y = coords[None, :, None]
    x = coords[None, None, :]
    # Head-frame coordinates: u left-right, v anterior-posterior.
    ct, st = math.cos(theta), math.sin(theta)
    u = (x - off_x) * ct + (y - off_y) * st
    v = -(x - off_x) * st + (y - off_y) * ct
    shape = (n_slices, size, size)

    wobble = 0.012 * _smooth_field(rng, u, v, z, 60.0)
    r = np.sqrt((u / a_head) ** 2 + (v / b_head) ** 2 + (z / c_head) ** 2) * (1.0 + wobble)
    scalp_t = 5.0 / a_head
    skull_t = rng.uniform(5.0, 8.0) / a_head
    csf_t = rng.uniform(1.5, 3.5) / a_head
    r_skull_out = 1.0 - scalp_t
    r_skull_in = r_skull_out - skull_t
    r_brain = r_skull_in - csf_t

    head = r < 1.0
    bone = (r >= r_skull_in) & (r < r_skull_out)
    intracranial = r < r_skull_in
    brain = r < r_brain
    wm_edge = 0.68 + 0.05 * _smooth_field(rng, u, v, z, 35.0, terms=6)
    wm = brain & (r < wm_edge)

    # Lateral ventricles: two tilted ellipsoids; size varies (young to atrophic).
    vent = np.zeros(shape, dtype=bool)
    vent_scale = rng.uniform(0.7, 1.5)
    vz = rng.uniform(8.0, 20.0)
    vy = rng.uniform(-6.0, 4.0)
    for side in (-1.0, 1.0):
        vx = side * rng.uniform(5.0, 9.0)
        tilt = side * math.radians(rng.uniform(5.0, 15.0))
        du, dv = u - vx, v - vy
        ru = du * math.cos(tilt) + dv * math.sin(tilt)
        rv = -du * math.sin(tilt) + dv * math.cos(tilt)
        q = (ru / (4.5 * vent_scale)) ** 2 + (rv / 22.0) ** 2 + ((z - vz) / (11.0 * vent_scale)) ** 2
        vent |= q < 1.0
    vent &= brain

    values = MR_VALUES if modality == 'MR' else CT_VALUES
    img = np.full(shape, values['air'], dtype=np.float32)
    img[head] = values['scalp']
    img[bone] = values['bone'] if modality == 'MR' else values['bone'] + 0.0
    if modality == 'CT':
        # Diploe: denser cortical tables, lighter marrow space, so the skull is not a flat band.
        mid = (r_skull_in + r_skull_out) / 2
        img[bone] = (1350.0 - 700.0 * (1 - np.abs(r - mid) / (skull_t / 2 + 1e-6)).clip(0, 1))[bone]
    img[intracranial] = values['csf']
    img[brain] = values['gm']
    img[wm] = values['wm']
    img[vent] = values['csf']
    tissue_jitter = rng.uniform(-3.0, 3.0) if modality == 'CT' else rng.uniform(-40.0, 40.0)
    img[brain] += tissue_jitter

    # Lesions.
    if kinds is None:
        n_les = int(rng.choice([0, 1, 1, 1, 2, 2], p=None))
        kinds = [str(rng.choice(['tumor', 'hemorrhage', 'infarct'])) for _ in range(n_les)]
    lesions: list[Lesion] = []
    placed: list[tuple[np.ndarray, float]] = []
    for kind in kinds:
        if kind not in KIND_TO_LABEL:
            raise ValueError(f'unknown lesion kind {kind!r}')
        lesion = _plant_lesion(rng, kind, img, modality, u, v, z, r, r_brain, brain, vent,
                               (a_head, b_head, c_head), zs, placed, spacing)
        if lesion is not None:
            lesions.append(lesion)

    # Noise and, for MR, scanner gain and bias field.
    if modality == 'CT':
        img += rng.normal(0.0, rng.uniform(3.0, 6.5), size=shape).astype(np.float32)
        intercept, slope = -1024.0, 1.0
        stored = np.clip(np.rint(img - intercept), 0, 4095).astype(np.uint16)
        wc, ww = 40.0, 80.0
    else:
        gain = rng.uniform(0.6, 2.5)
        bias = 1.0 + 0.08 * _smooth_field(rng, u, v, z, 180.0, terms=3)
        img = img * bias * gain
        img += rng.normal(0.0, 14.0 * gain * rng.uniform(0.7, 1.4), size=shape).astype(np.float32)
        # Magnitude images are non-negative (Rician floor), so fold negatives.
        img = np.abs(img)
        intercept, slope = 0.0, 1.0
        stored = np.clip(np.rint(img), 0, 65535).astype(np.uint16)
        lo, hi = np.percentile(stored, [1.0, 99.5])
        wc, ww = float((lo + hi) / 2), float(max(hi - lo, 1.0))

    return Series(seed=seed, modality=modality, stored=stored, slope=slope, intercept=intercept,
                  pixel_spacing_mm=spacing, slice_thickness_mm=thickness, z0_mm=float(zs[0]),
                  window_center=wc, window_width=ww, lesions=lesions)


def _plant_lesion(rng: np.random.Generator, kind: str, img: np.ndarray, modality: str,
                  u: np.ndarray, v: np.ndarray, z: np.ndarray, r: np.ndarray, r_brain: float,
                  brain: np.ndarray, vent: np.ndarray, axes: tuple[float, float, float],
                  zs: np.ndarray, placed: list[tuple[np.ndarray, float]], spacing: float) -> Lesion | None:
    a_head, b_head, c_head = axes
    z_lo, z_hi = float(zs[0]) + 12.0, float(zs[-1]) - 12.0
    if kind == 'tumor':
        radius = rng.uniform(9.0, 19.0)
    elif kind == 'hemorrhage':
        radius = rng.uniform(7.0, 15.0)
    else:
        radius = rng.uniform(8.0, 16.0)
    semi = radius * rng.uniform(0.8, 1.2, size=3)
    semi[2] = radius * rng.uniform(0.75, 1.1)
    if kind == 'infarct':
        semi[1] = radius * rng.uniform(1.3, 1.7)  # elongated along the radial direction

    center = None
    for _ in range(200):
        # Sample a point in head-frame coordinates, inside the brain, with margins.
        cz = rng.uniform(z_lo, z_hi)
        ang = rng.uniform(0, 2 * math.pi)
        lo, hi = (0.55, 0.72) if kind == 'infarct' else (0.0, 0.62)
        frac = math.sqrt(rng.uniform(lo ** 2, hi ** 2))
        scale_z = math.sqrt(max(0.0, 1 - (cz / c_head) ** 2))
        cu = frac * r_brain * a_head * scale_z * math.cos(ang)
        cv = frac * r_brain * b_head * scale_z * math.sin(ang)
        if scale_z < 0.6:
            continue
        c = np.array([cu, cv, cz])
        if any(np.linalg.norm(c - p) < radius + pr + 6.0 for p, pr in placed):
            continue
        center = c
        break
    if center is None:
        return None
    placed.append((center, float(radius)))

    du, dv, dz = u - center[0], v - center[1], z - center[2]
    # Orientation: infarcts point to the cortex (their long axis is radial), others random.
    phi = math.atan2(center[1], center[0]) - math.pi / 2 if kind == 'infarct' else rng.uniform(0, math.pi)
    ru = du * math.cos(phi) + dv * math.sin(phi)
    rv = -du * math.sin(phi) + dv * math.cos(phi)
    q = np.sqrt((ru / semi[0]) ** 2 + (rv / semi[1]) ** 2 + (dz / semi[2]) ** 2)
    outline = 1.0 + 0.12 * _smooth_field(rng, du, dv, dz, 2.2 * radius, terms=5)
    q = q * outline
    core = (q < 1.0) & brain & ~vent

    def shell(factor: float) -> np.ndarray:
        # Oedema / rim grows in-plane only: stretching z by the same factor keeps it on the
        # lesion's own slices. Oedema alone on the slices above and below a mass would look
        # exactly like an infarct to a per-slice model, which a reader resolves in 3D.
        qs = np.sqrt((ru / semi[0]) ** 2 + (rv / semi[1]) ** 2 + (dz * factor / semi[2]) ** 2) * outline
        return (qs < factor) & ~core & brain & ~vent

    if kind == 'tumor':
        ring = rng.random() < 0.6
        edema = shell(rng.uniform(1.4, 1.8))
        if modality == 'CT':
            img[edema] = rng.uniform(16.0, 22.0)
            if ring:
                inner = q < rng.uniform(0.55, 0.7)
                img[core] = rng.uniform(62.0, 80.0)
                img[core & inner] = rng.uniform(12.0, 22.0)
            else:
                img[core] = rng.uniform(48.0, 60.0)
        else:
            img[edema] = rng.uniform(760.0, 900.0)
            if ring:
                inner = q < rng.uniform(0.55, 0.7)
                img[core] = rng.uniform(1150.0, 1300.0)
                img[core & inner] = rng.uniform(300.0, 420.0)
            else:
                img[core] = rng.uniform(1020.0, 1150.0)
    elif kind == 'hemorrhage':
        rim = shell(1.2)
        if modality == 'CT':
            img[rim] = rng.uniform(20.0, 26.0)
            img[core] = rng.uniform(65.0, 88.0)
        else:
            img[core] = rng.uniform(1250.0, 1420.0)
            dark = core & (q >= 0.85)
            img[dark] = rng.uniform(160.0, 240.0)
    else:
        if modality == 'CT':
            img[core] = rng.uniform(13.0, 22.0)
        else:
            img[core] = rng.uniform(960.0, 1100.0)

    min_px = MIN_TRUTH_AREA_MM2 / (spacing * spacing)
    boxes: list[SliceBox] = []
    for k in range(core.shape[0]):
        m = core[k]
        area = int(m.sum())
        if area < min_px:
            continue
        rows = np.flatnonzero(m.any(axis=1))
        cols = np.flatnonzero(m.any(axis=0))
        boxes.append(SliceBox(k, int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1),
                              int(rows[-1] - rows[0] + 1), area))
    if not boxes:
        return None
    return Lesion(kind=kind, label=KIND_TO_LABEL[kind], center_mm=(float(center[0]), float(center[1]), float(center[2])),
                  boxes=boxes)


# ---------------------------------------------------------------------------------------------
# Domain randomization (model 2.0.0). generate_series above is family A as model 1.0.0 saw it;
# a detector trained on it alone learned that generator (sensitivity 0.75 on an independent
# one). generate_randomized_series draws everything the first generator holds fixed: head
# outline (superquadric, asymmetric, scalp/skull/CSF widths), sulci, deep grey nuclei, midline
# fissure, tissue values (CT HU offsets; MR arbitrary gain and grey/white inversion), lesion
# size, outline (lobulated), texture, rims and oedema, positions anywhere in the brain, slice
# thickness with partial volume (each slice averages sub-slices across its thickness), matrix
# sizes, point-spread blur, bias fields and noise (white, correlated, Rician). It evaluates one
# slice at a time, so 512 x 512 matrices stay cheap in memory, and its random stream is its
# own (seeded [seed, RANDOMIZED_STREAM]) so family A is untouched.

RANDOMIZED_STREAM = 0xD0A1


class _Field:
    """A smooth random field drawn once and evaluated anywhere (a few random 3D cosines)."""

    def __init__(self, rng: np.random.Generator, wavelength_mm: float, terms: int = 4) -> None:
        d = rng.normal(size=(terms, 3))
        self.dirs = d / (np.linalg.norm(d, axis=1, keepdims=True) + 1e-9)
        self.k = 2 * math.pi / (wavelength_mm * rng.uniform(0.7, 1.4, size=terms))
        self.phase = rng.uniform(0, 2 * math.pi, size=terms)
        self.norm = math.sqrt(terms / 2.0)

    def __call__(self, x: np.ndarray, y: np.ndarray, z: float) -> np.ndarray:
        out = np.zeros(np.broadcast_shapes(x.shape, y.shape), dtype=np.float32)
        for (dx, dy, dz), k, ph in zip(self.dirs, self.k, self.phase):
            out += np.cos(k * (dx * x + dy * y + dz * z) + ph).astype(np.float32)
        return out / self.norm


@dataclasses.dataclass
class _Head:
    semi: tuple[float, float, float, float, float]  # left, right, anterior, posterior, cranio-caudal (mm)
    power: float  # superquadric exponent: 2 is an ellipsoid, lower is pointier, higher boxier
    wobble: _Field
    wobble_amp: float
    scalp: float  # shell widths in units of r
    skull: float
    csf: float

    def radius(self, u: np.ndarray, v: np.ndarray, z: float) -> np.ndarray:
        a = np.where(u < 0, self.semi[0], self.semi[1])
        b = np.where(v < 0, self.semi[2], self.semi[3])
        p = self.power
        q = np.abs(u / a) ** p + np.abs(v / b) ** p + abs(z / self.semi[4]) ** p
        return q ** (1.0 / p) * (1.0 + self.wobble_amp * self.wobble(u, v, z))

    @property
    def r_skull_out(self) -> float:
        return 1.0 - self.scalp

    @property
    def r_skull_in(self) -> float:
        return self.r_skull_out - self.skull

    @property
    def r_brain(self) -> float:
        return self.r_skull_in - self.csf


@dataclasses.dataclass
class _Wedge:
    """A vascular territory's infarct: a wedge with its apex in the deep white matter that widens
    out to the cortex (the brain's outline clips its base, so the base follows the gyri) and
    stays on its own side of the midline, as an arterial territory does."""
    apex: tuple[float, float]  # head frame, mm
    axis: tuple[float, float]  # unit vector, apex towards the cortex
    tan_half: float  # in-plane half-angle's tangent
    side: float  # sign of u on the lesion's hemisphere

    def q(self, u: np.ndarray, v: np.ndarray, dz: float, semi_z: float) -> np.ndarray:
        wu, wv = u - self.apex[0], v - self.apex[1]
        along = wu * self.axis[0] + wv * self.axis[1]
        across = np.abs(wu * self.axis[1] - wv * self.axis[0])
        q = np.sqrt((across / (np.maximum(along, 1e-3) * self.tan_half)) ** 2 + (dz / semi_z) ** 2)
        return np.where((along > 0) & (u * self.side >= 0), q, np.inf)


@dataclasses.dataclass
class _RandLesion:
    kind: str
    center: np.ndarray  # head frame, mm
    semi: np.ndarray
    phi: float
    outline: _Field
    outline_amp: float
    lobes: list[tuple[np.ndarray, float]]  # extra blobs: centre offset (mm) and radius (mm)
    texture: _Field
    texture_amp: float
    values: dict[str, float]  # core, inner (ring centre), shell (oedema/rim)
    inner_q: float  # ring: q below this is the necrotic centre; 0 = solid
    shell_factor: float  # oedema / rim extent in q units; 0 = none
    dark_rim_q: float  # MR haemorrhage: q above this in the core is dark; 0 = none
    calcified: float | None = None  # tumour calcification specks: their value, None = none
    wedge: _Wedge | None = None  # territorial infarct: a wedge from a deep apex out to the cortex
    relative: float = 0.0  # infarct drawn relative to the tissue under it (CT: HU added; MR: gain - 1); 0 = absolute
    collapse: bool = False  # CT: grey matter in the infarct falls to white matter (lost grey/white border)

    def q(self, u: np.ndarray, v: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
        du, dv, dz = u - self.center[0], v - self.center[1], z - self.center[2]
        c, s = math.cos(self.phi), math.sin(self.phi)
        ru, rv = du * c + dv * s, -du * s + dv * c
        wob = 1.0 + self.outline_amp * self.outline(du, dv, dz)
        if self.wedge is not None:
            return self.wedge.q(u, v, dz, self.semi[2]) * wob, np.full_like(u, np.inf)
        q = np.sqrt((ru / self.semi[0]) ** 2 + (rv / self.semi[1]) ** 2 + (dz / self.semi[2]) ** 2) * wob
        for off, rad in self.lobes:
            ql = np.sqrt((du - off[0]) ** 2 + (dv - off[1]) ** 2 + (dz - off[2]) ** 2) / rad * wob
            q = np.minimum(q, ql)
        # The shell grows in-plane only (as in family A: oedema alone above and below a mass
        # would be an infarct to a per-slice reader).
        qs = np.sqrt((ru / self.semi[0]) ** 2 + (rv / self.semi[1]) ** 2) * wob
        return q, qs


def _draw_tissue(rng: np.random.Generator, modality: str) -> dict[str, float]:
    if modality == 'CT':
        off = rng.uniform(-8.0, 8.0)  # scanner calibration drift, applied to every soft tissue
        gm = rng.uniform(33.0, 46.0)
        return {'air': -1000.0, 'scalp': rng.uniform(15.0, 60.0) + off, 'bone': rng.uniform(700.0, 1900.0),
                'csf': rng.uniform(0.0, 14.0) + off, 'gm': gm + off, 'wm': gm - rng.uniform(3.0, 13.0) + off,
                'deep': gm - rng.uniform(0.0, 5.0) + off, 'off': off}
    gm = 600.0
    inverted = rng.random() < 0.3  # T1-like grey/white order
    wm = gm * (rng.uniform(1.08, 1.35) if inverted else rng.uniform(0.65, 0.92))
    return {'air': rng.uniform(0.0, 15.0), 'scalp': gm * rng.uniform(0.6, 1.6), 'bone': gm * rng.uniform(0.03, 0.2),
            'csf': gm * (rng.uniform(0.1, 0.35) if rng.random() < 0.85 else rng.uniform(0.35, 0.6)),
            'gm': gm, 'wm': wm, 'deep': gm * rng.uniform(0.85, 1.05), 'off': 0.0}


def _lesion_values(rng: np.random.Generator, kind: str, modality: str, t: dict[str, float]) -> dict[str, Any]:
    """Intensities and structure of one lesion, relative to the series' tissue values."""
    off, gm = t['off'], t['gm']
    out: dict[str, Any] = {'inner_q': 0.0, 'shell_factor': 0.0, 'dark_rim_q': 0.0, 'shell': 0.0, 'inner': 0.0}
    if kind == 'tumor':
        ring = rng.random() < 0.5
        if rng.random() < 0.8:
            out['shell_factor'] = rng.uniform(1.25, 1.9)
        if ring:
            out['inner_q'] = rng.uniform(0.45, 0.75)
        if modality == 'CT':
            out['shell'] = rng.uniform(13.0, 23.0) + off
            out['core'] = (rng.uniform(58.0, 80.0) if ring else rng.uniform(46.0, 62.0)) + off
            out['inner'] = rng.uniform(8.0, 24.0) + off
        else:
            out['shell'] = gm * rng.uniform(1.15, 1.5)
            out['core'] = gm * (rng.uniform(1.7, 2.3) if ring else rng.uniform(1.5, 2.0))
            out['inner'] = gm * rng.uniform(0.35, 0.8)
    elif kind == 'hemorrhage':
        if modality == 'CT':
            if rng.random() < 0.7:
                out['shell_factor'] = rng.uniform(1.1, 1.35)
                out['shell'] = rng.uniform(16.0, 27.0) + off
            out['core'] = rng.uniform(60.0, 92.0) + off
        else:
            out['core'] = gm * rng.uniform(1.8, 2.5)
            if rng.random() < 0.75:
                out['dark_rim_q'] = rng.uniform(0.75, 0.9)
                out['inner'] = gm * rng.uniform(0.15, 0.5)
    else:
        if modality == 'CT':
            out['core'] = rng.uniform(8.0, 23.0) + off
        else:
            out['core'] = gm * rng.uniform(1.35, 1.85)
    return out


def _draw_lesion(rng: np.random.Generator, kind: str, head: _Head, tissue: dict[str, float], modality: str,
                 z_lo: float, z_hi: float, placed: list[tuple[np.ndarray, float]]) -> _RandLesion | None:
    radius = {'tumor': (5.0, 24.0), 'hemorrhage': (4.5, 20.0), 'infarct': (5.0, 21.0)}[kind]
    radius_mm = float(rng.uniform(*radius))
    cortical = kind == 'infarct' and rng.random() < 0.7
    semi = radius_mm * rng.uniform(0.75, 1.25, size=3)
    semi[2] = radius_mm * rng.uniform(0.6, 1.2)
    if cortical:
        semi[1] = radius_mm * rng.uniform(1.2, 1.8)
    center = None
    for _ in range(300):
        c = np.array([rng.uniform(-90, 90), rng.uniform(-110, 110), rng.uniform(z_lo, z_hi)])
        rc = float(head.radius(np.array([c[0]]), np.array([c[1]]), float(c[2]))[0])
        frac = rc / head.r_brain
        lo, hi = (0.6, 0.95) if cortical else (0.0, 0.9)
        if not (lo <= frac < hi):
            continue
        if any(np.linalg.norm(c - p) < radius_mm + pr + 4.0 for p, pr in placed):
            continue
        center = c
        break
    if center is None:
        return None
    placed.append((center, radius_mm))
    phi = math.atan2(center[1], center[0]) - math.pi / 2 if cortical else rng.uniform(0, math.pi)
    lobes = []
    if kind != 'infarct' and rng.random() < 0.4:
        for _ in range(int(rng.integers(1, 4))):
            d = rng.normal(size=3)
            d /= np.linalg.norm(d) + 1e-9
            lobes.append((d * radius_mm * rng.uniform(0.4, 0.8), radius_mm * rng.uniform(0.35, 0.7)))
    vals = _lesion_values(rng, kind, modality, tissue)
    return _RandLesion(kind=kind, center=center, semi=semi, phi=phi,
                       outline=_Field(rng, 2.2 * radius_mm, terms=5), outline_amp=float(rng.uniform(0.04, 0.25)),
                       lobes=lobes, texture=_Field(rng, rng.uniform(4.0, 12.0), terms=6),
                       texture_amp=float(rng.uniform(0.0, 0.3)),
                       values={'core': vals['core'], 'inner': vals['inner'], 'shell': vals['shell']},
                       inner_q=vals['inner_q'], shell_factor=vals['shell_factor'], dark_rim_q=vals['dark_rim_q'],
                       calcified=_calcification(rng, kind, modality, tissue))


# Infarcts as they look in a real head (train.py --territorial-infarcts). Without it an infarct is an
# ellipsoid of one absolute value, its long axis radial, so narrow where it meets the cortex and
# 10-38 HU below grey matter. An arterial territory's infarct is a wedge that widens to the
# cortex and stops at the midline, and an acute one is subtle: 6-16 HU below the tissue it is in,
# grey matter falling to white matter's value (the lost grey/white border), FLAIR brighter by a
# fraction. These come from their own random stream ([seed, INFARCT_STREAM]), so every other draw
# of a series, and every tumour and haemorrhage, stays as it was.

INFARCT_STREAM = 0x1FA2


def _territorial(rng: np.random.Generator, les: _RandLesion, modality: str) -> None:
    if les.kind != 'infarct':
        return
    c = les.center
    reach = math.hypot(float(c[0]), float(c[1]))
    if reach > 12.0 and rng.random() < 0.6:
        ang = math.atan2(float(c[1]), float(c[0])) + math.radians(float(rng.uniform(-12.0, 12.0)))
        axis = (math.cos(ang), math.sin(ang))
        depth = reach * float(rng.uniform(0.25, 0.7))
        side = math.copysign(1.0, float(c[0])) if abs(float(c[0])) > 1.0 else float(rng.choice([-1.0, 1.0]))
        les.wedge = _Wedge(apex=(axis[0] * depth, axis[1] * depth), axis=axis,
                           tan_half=math.tan(math.radians(float(rng.uniform(10.0, 32.0)))), side=side)
        les.semi = np.array([les.semi[0], les.semi[1], float(rng.uniform(8.0, 30.0))])
    if rng.random() < 0.6:
        if modality == 'CT':
            les.relative = -float(rng.uniform(6.0, 16.0))
            les.collapse = bool(rng.random() < 0.5)
        else:
            les.relative = float(rng.uniform(0.15, 0.7))


# Tumours across the densities real ones have (train.py --tumour-spectrum). Without it a tumour's
# solid part is always brighter than grey matter (CT 46-80 HU, MR 1.5-2.3x), which a model can
# learn as "bright and round". On CT many gliomas are hypodense and many masses isodense, seen by
# their oedema and the mass effect; on FLAIR a solid tumour may be barely brighter than the cortex.
# Drawn from their own stream ([seed, TUMOUR_STREAM]), so everything else of a series stays.

TUMOUR_STREAM = 0x7A55


def _tumour_spectrum(rng: np.random.Generator, les: _RandLesion, modality: str, tissue: dict[str, float]) -> None:
    if les.kind != 'tumor':
        return
    look = str(rng.choice(['as drawn', 'iso', 'hypo'], p=[0.4, 0.35, 0.25]))
    if look == 'as drawn':
        return
    gm = tissue['gm']
    if modality == 'CT':
        les.values['core'] = gm + (float(rng.uniform(-3.0, 5.0)) if look == 'iso' else -float(rng.uniform(4.0, 14.0)))
    else:
        les.values['core'] = gm * (float(rng.uniform(0.95, 1.25)) if look == 'iso' else float(rng.uniform(0.6, 0.85)))
    # An isodense tumour without oedema would be invisible: a truth box on nothing.
    if les.shell_factor == 0.0 and (look == 'iso' or rng.random() < 0.5):
        les.shell_factor = float(rng.uniform(1.3, 1.9))


def _calcification(rng: np.random.Generator, kind: str, modality: str, tissue: dict[str, float]) -> float | None:
    if kind != 'tumor' or rng.random() >= 0.3:
        return None
    return float(rng.uniform(150.0, 500.0)) if modality == 'CT' else tissue['gm'] * float(rng.uniform(0.1, 0.4))


def _gaussian_blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur (reflect edges), numpy only."""
    if sigma <= 0.05:
        return img
    radius = max(1, int(math.ceil(3 * sigma)))
    k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2).astype(np.float32)
    k /= k.sum()
    pad = np.pad(img, radius, mode='reflect')
    tmp = sum(k[i] * pad[:, i:i + img.shape[1]] for i in range(len(k)))
    return sum(k[i] * tmp[i:i + img.shape[0], :] for i in range(len(k))).astype(np.float32)


# Normal anatomy that is not a lesion (train.py --normal-anatomy). A detector that has seen only
# lesions and a few smooth structures may learn that any compact blob is a lesion; on another
# generator's heads most false positives were on normal structures away from every lesion. These
# draw what a real head CT or MR holds besides lesions: physiological calcifications (pineal,
# choroid plexus, basal ganglia), dural sinuses and vessels, orbits, air sinuses and petrous bone
# in low slices, perivascular spaces, and symmetric periventricular signal. Most come in mirrored
# pairs, as normal anatomy does and lesions seldom do. They come from their own random stream
# ([seed, DISTRACTOR_STREAM]), which leaves every other draw of a series, and so every lesion's
# place and truth box, as it was. Measured on the held-out family's tune split: README.md.

DISTRACTOR_STREAM = 0xD15C


@dataclasses.dataclass
class _Blob:
    """An ellipsoid painted with one value: in the brain only, or anywhere inside the skull."""
    center: tuple[float, float, float]  # head frame, mm
    semi: tuple[float, ...]
    phi: float
    value: float
    inside_skull: bool = False


def _draw_distractors(rng: np.random.Generator, head: _Head, tissue: dict[str, float], modality: str,
                      vents: list[tuple[float, float, float]], vent_scale: float, vy: float, vz: float,
                      deep_params: list[tuple[float, float, float]]) -> list[_Blob]:
    ct = modality == 'CT'
    gm, wm, off = tissue['gm'], tissue['wm'], tissue['off']
    calc = (lambda: gm + float(rng.uniform(120.0, 600.0))) if ct else (lambda: gm * float(rng.uniform(0.08, 0.45)))
    blobs: list[_Blob] = []

    def pair(u: float, v: float, z: float, semi: tuple[float, float, float], value: float, jitter: float = 1.5,
             inside: bool = False, phi: float = 0.0) -> None:
        for side in (-1.0, 1.0):
            j = rng.normal(0.0, jitter, size=3)
            blobs.append(_Blob((side * u + j[0], v + j[1], z + j[2]), tuple(float(a * rng.uniform(0.85, 1.15)) for a in semi),
                               side * phi, value, inside))

    if rng.random() < 0.5:  # pineal: one small midline calcification behind the third ventricle
        r = float(rng.uniform(1.5, 4.0))
        blobs.append(_Blob((float(rng.normal(0.0, 0.8)), vy + float(rng.uniform(14.0, 24.0)), vz + float(rng.uniform(-6.0, 2.0))),
                           (r, r * float(rng.uniform(0.8, 1.3)), r), 0.0, calc()))
    if rng.random() < 0.4:  # choroid plexus in both atria
        r = float(rng.uniform(2.0, 5.0))
        pair(abs(vents[1][0]) + float(rng.uniform(2.0, 8.0)), vy + float(rng.uniform(12.0, 20.0)), vz + float(rng.uniform(-3.0, 5.0)),
             (r, r * 1.3, r), calc())
    if rng.random() < 0.25:  # basal ganglia calcification, mirrored
        dx, dy, _ = deep_params[1]
        r = float(rng.uniform(1.5, 3.5))
        pair(abs(dx), dy, 5.0 + float(rng.uniform(-4.0, 4.0)), (r, r * 1.4, r * 1.2), calc())
    if rng.random() < 0.6:  # superior sagittal sinus, seen front and back at the midline by the skull
        value = gm + float(rng.uniform(10.0, 35.0)) if ct else gm * float(rng.choice([rng.uniform(0.05, 0.3), rng.uniform(1.3, 1.9)]))
        for v_end in (-head.semi[2], head.semi[3]):
            r = float(rng.uniform(2.5, 5.0))
            for z in np.arange(-10.0, head.semi[4], 3.0):
                shrink = math.sqrt(max(0.0, 1.0 - (z / head.semi[4]) ** 2))
                vv = v_end * head.r_skull_in * shrink * 0.97
                blobs.append(_Blob((0.0, float(vv), float(z)), (r, r * 0.8, 2.5), 0.0, value, True))
    n_vessels = int(rng.choice([0, 1, 2, 3, 4], p=[0.45, 0.2, 0.15, 0.1, 0.1]))
    for _ in range(n_vessels):  # curved vessels: dense on CT, flow voids (or bright) on MR
        value = gm + float(rng.uniform(12.0, 45.0)) if ct else gm * (float(rng.uniform(0.05, 0.35)) if rng.random() < 0.7 else float(rng.uniform(1.4, 2.0)))
        r = float(rng.uniform(0.7, 2.0))
        p = np.array([rng.uniform(-40, 40), rng.uniform(-50, 50), rng.uniform(-30, 40)])
        d = rng.normal(size=3)
        d[2] *= 0.5
        d /= np.linalg.norm(d) + 1e-9
        for _ in range(int(rng.integers(8, 30))):
            blobs.append(_Blob((float(p[0]), float(p[1]), float(p[2])), (r, r, r), 0.0, value))
            d = d + rng.normal(0.0, 0.25, size=3)
            d /= np.linalg.norm(d) + 1e-9
            p = p + d * max(r, 1.0) * 1.2
    if rng.random() < 0.5:  # skull base: orbits with fat behind them, air sinuses, petrous bone
        z_base = -head.semi[4] * float(rng.uniform(0.35, 0.55))
        globe = float(rng.uniform(9.0, 12.5))
        fat = -float(rng.uniform(70.0, 120.0)) if ct else gm * float(rng.uniform(1.4, 2.2))
        water = float(rng.uniform(0.0, 20.0)) + off if ct else tissue['csf'] * float(rng.uniform(0.8, 1.5))
        u_orb, v_orb = float(rng.uniform(24.0, 34.0)), -head.semi[2] * float(rng.uniform(0.62, 0.78))
        pair(u_orb, v_orb + globe * 0.9, z_base, (globe * 1.2, globe * 1.6, globe * 0.9), fat, inside=True)
        pair(u_orb, v_orb, z_base, (globe, globe, globe), water, inside=True)
        air = tissue['air']
        for _ in range(int(rng.integers(1, 4))):
            blobs.append(_Blob((float(rng.normal(0.0, 8.0)), v_orb + float(rng.uniform(5.0, 25.0)), z_base - float(rng.uniform(0.0, 15.0))),
                               (float(rng.uniform(5.0, 14.0)), float(rng.uniform(5.0, 12.0)), float(rng.uniform(6.0, 14.0))),
                               float(rng.uniform(0, math.pi)), air, True))
        pair(float(rng.uniform(25.0, 40.0)), head.semi[3] * float(rng.uniform(0.15, 0.4)), z_base + float(rng.uniform(-8.0, 4.0)),
             (float(rng.uniform(5.0, 9.0)), float(rng.uniform(18.0, 28.0)), float(rng.uniform(5.0, 9.0))), tissue['bone'],
             inside=True, phi=math.radians(float(rng.uniform(30.0, 55.0))))
    if rng.random() < 0.4:  # perivascular spaces: CSF dots in the deep white matter, both sides
        for _ in range(int(rng.integers(4, 20))):
            r = float(rng.uniform(0.7, 1.8))
            pair(float(rng.uniform(8.0, 35.0)), float(rng.uniform(-25.0, 25.0)), float(rng.uniform(-5.0, 25.0)),
                 (r, r, r * float(rng.uniform(1.0, 3.0))), tissue['csf'], jitter=6.0)
    if rng.random() < 0.3:  # periventricular caps and bands, symmetric
        value = wm - float(rng.uniform(3.0, 10.0)) if ct else gm * float(rng.uniform(1.1, 1.45))
        for v_end in (-1.0, 1.0):
            w = float(rng.uniform(3.0, 7.0)) * vent_scale
            pair(abs(vents[1][0]) + float(rng.uniform(0.0, 6.0)), vy + v_end * float(rng.uniform(18.0, 26.0)), vz,
                 (w, float(rng.uniform(4.0, 9.0)), float(rng.uniform(6.0, 14.0))), value, jitter=1.0)
    return blobs


def _paint_blobs(img: np.ndarray, blobs: list[_Blob], u: np.ndarray, v: np.ndarray, z: float, brain: np.ndarray,
                 inside: np.ndarray, to_pixel: Any, spacing: float) -> None:
    """Paints the blobs this plane cuts, each over its own window of the image only."""
    rows, cols = img.shape
    for b in blobs:
        dz = (z - b.center[2]) / b.semi[2]
        if abs(dz) >= 1.0:
            continue
        cr, cc = to_pixel(b.center[0], b.center[1])
        reach = max(b.semi[0], b.semi[1]) / spacing + 2
        r0, r1 = max(0, int(cr - reach)), min(rows, int(cr + reach) + 1)
        c0, c1 = max(0, int(cc - reach)), min(cols, int(cc + reach) + 1)
        if r0 >= r1 or c0 >= c1:
            continue
        du, dv = u[r0:r1, c0:c1] - b.center[0], v[r0:r1, c0:c1] - b.center[1]
        c, s = math.cos(b.phi), math.sin(b.phi)
        ru, rv = du * c + dv * s, -du * s + dv * c
        m = (ru / b.semi[0]) ** 2 + (rv / b.semi[1]) ** 2 + dz * dz < 1.0
        m &= (inside if b.inside_skull else brain)[r0:r1, c0:c1]
        img[r0:r1, c0:c1][m] = b.value


def generate_randomized_series(seed: int, modality: str, rows: int = 256, cols: int | None = None,
                               kinds: list[str] | None = None, n_slices: int | None = None,
                               normal_anatomy: bool = False, territorial_infarcts: bool = False,
                               tumour_spectrum: bool = False) -> Series:
    """One domain-randomized phantom series (see the section comment). Same Series contract as
    generate_series; truth boxes are on the partial-volume core (fraction >= 0.5).
    `normal_anatomy`: also structures that are not lesions (_draw_distractors).
    `territorial_infarcts`: infarcts as wedges and subtle relative changes (_territorial).
    `tumour_spectrum`: tumours also iso- or hypodense, seen by their oedema (_tumour_spectrum)."""
    if modality not in ('CT', 'MR'):
        raise ValueError(f'modality must be CT or MR, got {modality!r}')
    cols = rows if cols is None else cols
    rng = np.random.default_rng([seed, RANDOMIZED_STREAM])
    fov_mm = rng.uniform(185.0, 280.0)
    spacing = fov_mm / max(rows, cols)
    thickness = float(rng.choice([1.5, 2.5, 3.0, 4.0, 5.0, 5.0, 6.0, 7.5]))
    if n_slices is None:
        n_slices = int(np.clip(round(rng.uniform(70.0, 135.0) / thickness), 8, 36))
    sub = 1 if thickness < 2.0 else (2 if thickness < 4.0 else 3)

    a = rng.uniform(58.0, 86.0)
    head = _Head(semi=(a * rng.uniform(0.93, 1.07), a * rng.uniform(0.93, 1.07), rng.uniform(78.0, 106.0) * rng.uniform(0.93, 1.07),
                       rng.uniform(78.0, 106.0), rng.uniform(66.0, 88.0)),
                 power=float(rng.uniform(1.7, 2.8)), wobble=_Field(rng, rng.uniform(30.0, 90.0), terms=5),
                 wobble_amp=float(rng.uniform(0.005, 0.05)),
                 scalp=rng.uniform(2.0, 9.0) / a, skull=rng.uniform(3.0, 11.0) / a, csf=rng.uniform(0.5, 5.0) / a)
    theta = math.radians(rng.uniform(-30.0, 30.0))
    off_x, off_y = rng.uniform(-25.0, 25.0, size=2)
    slab = n_slices * thickness
    z_mid = rng.uniform(-15.0, 35.0)
    z0 = z_mid - slab / 2
    tissue = _draw_tissue(rng, modality)

    wm_field, wm_edge, wm_amp = _Field(rng, rng.uniform(15.0, 45.0), terms=6), rng.uniform(0.6, 0.78), rng.uniform(0.02, 0.09)
    # Sulci: none, scattered CSF pockets under the surface, or a folded network (CSF along the
    # zero set of a smooth field: thin wavy clefts reaching deep into the cortex).
    sulci = str(rng.choice(['none', 'pockets', 'network'], p=[0.2, 0.3, 0.5]))
    sulc_field, sulc_depth, sulc_thr = _Field(rng, rng.uniform(8.0, 18.0), terms=6), rng.uniform(0.05, 0.14), rng.uniform(0.8, 1.5)
    net_field = _Field(rng, rng.uniform(14.0, 40.0), terms=8)
    net_depth, net_width = rng.uniform(0.12, 0.45), rng.uniform(0.06, 0.22)
    fissure = rng.uniform(0.5, 3.0) if rng.random() < 0.6 else 0.0
    # A falx seen in the fissure: bright (calcified) on CT, dark on MR.
    falx = (rng.uniform(60.0, 250.0) if modality == 'CT' else tissue['gm'] * rng.uniform(0.05, 0.3)) if rng.random() < 0.5 else None
    vent_scale, vz, vy = rng.uniform(0.5, 2.0), rng.uniform(5.0, 22.0), rng.uniform(-8.0, 6.0)
    vents = []
    for side in (-1.0, 1.0):
        vents.append((side * rng.uniform(4.0, 10.0), side * math.radians(rng.uniform(3.0, 18.0)), rng.uniform(3.5, 6.0)))
    deep = rng.random() < 0.7
    deep_params = [(side * rng.uniform(14.0, 24.0), rng.uniform(-5.0, 12.0), rng.uniform(6.0, 10.0)) for side in (-1.0, 1.0)]

    blobs = _draw_distractors(np.random.default_rng([seed, DISTRACTOR_STREAM]), head, tissue, modality, vents, vent_scale,
                              vy, vz, deep_params) if normal_anatomy else []

    if kinds is None:
        n_les = int(rng.choice([0, 1, 2, 3], p=[0.2, 0.4, 0.3, 0.1]))
        kinds = [str(rng.choice(['tumor', 'hemorrhage', 'infarct'])) for _ in range(n_les)]
    placed: list[tuple[np.ndarray, float]] = []
    z_first, z_last = z0 + thickness / 2, z0 + thickness * (n_slices - 0.5)
    rand_lesions = []
    for kind in kinds:
        if kind not in KIND_TO_LABEL:
            raise ValueError(f'unknown lesion kind {kind!r}')
        les = _draw_lesion(rng, kind, head, tissue, modality, z_first + 2.0, z_last - 2.0, placed)
        if les is not None:
            rand_lesions.append(les)
    if territorial_infarcts:
        infarct_rng = np.random.default_rng([seed, INFARCT_STREAM])
        for les in rand_lesions:
            _territorial(infarct_rng, les, modality)
    if tumour_spectrum:
        tumour_rng = np.random.default_rng([seed, TUMOUR_STREAM])
        for les in rand_lesions:
            _tumour_spectrum(tumour_rng, les, modality, tissue)

    # Acquisition: in-plane blur, noise texture and level, bias field.
    blur = float(rng.uniform(0.0, 1.2)) if rng.random() < 0.6 else 0.0
    noise_kind = str(rng.choice(['white', 'correlated', 'rician'] if modality == 'MR' else ['white', 'correlated']))
    corr_sigma = float(rng.uniform(0.7, 2.0))
    if modality == 'CT':
        noise_sd = float(rng.uniform(1.5, 11.0))
        cupping = float(rng.uniform(-8.0, 10.0)) if rng.random() < 0.5 else 0.0
    else:
        noise_sd = tissue['gm'] * float(rng.uniform(0.008, 0.07))
        gain = float(np.exp(rng.uniform(math.log(0.03), math.log(40.0))))
    bias_amp = float(rng.uniform(0.0, 0.3)) if modality == 'MR' else 0.0
    bias = _Field(rng, rng.uniform(120.0, 300.0), terms=3)

    ys = (np.arange(rows, dtype=np.float32) - (rows - 1) / 2.0) * spacing
    xs = (np.arange(cols, dtype=np.float32) - (cols - 1) / 2.0) * spacing
    x, y = xs[None, :], ys[:, None]
    ct_, st_ = math.cos(theta), math.sin(theta)
    u = (x - off_x) * ct_ + (y - off_y) * st_
    v = -(x - off_x) * st_ + (y - off_y) * ct_
    out = np.zeros((n_slices, rows, cols), dtype=np.float32)
    cores = [np.zeros((n_slices, rows, cols), dtype=np.float32) for _ in rand_lesions]

    def to_pixel(bu: float, bv: float) -> tuple[float, float]:
        px, py = off_x + bu * ct_ - bv * st_, off_y + bu * st_ + bv * ct_
        return py / spacing + (rows - 1) / 2.0, px / spacing + (cols - 1) / 2.0
    for k in range(n_slices):
        acc = np.zeros((rows, cols), dtype=np.float32)
        for j in range(sub):
            z = z0 + thickness * (k + (j + 0.5) / sub)
            r = head.radius(u, v, z)
            img = np.full((rows, cols), tissue['air'], dtype=np.float32)
            img[r < 1.0] = tissue['scalp']
            bone = (r >= head.r_skull_in) & (r < head.r_skull_out)
            if modality == 'CT':
                mid, half = (head.r_skull_in + head.r_skull_out) / 2, head.skull / 2 + 1e-6
                img[bone] = (tissue['bone'] + 300.0 - 650.0 * (1 - np.abs(r - mid) / half).clip(0, 1))[bone]
            else:
                img[bone] = tissue['bone']
            img[r < head.r_skull_in] = tissue['csf']
            brain = r < head.r_brain
            if sulci == 'pockets':
                brain &= ~((r > head.r_brain - sulc_depth) & (sulc_field(u, v, z) > sulc_thr))
            elif sulci == 'network':
                brain &= ~((r > head.r_brain - net_depth) & (np.abs(net_field(u, v, z)) < net_width))
            if fissure > 0:
                cleft = (np.abs(u) < fissure) & (np.abs(v) > 20.0) & (r < head.r_skull_in)
                brain &= ~cleft
                if falx is not None:
                    img[cleft & (np.abs(u) < 0.45 * spacing + 0.3)] = falx
            img[brain] = tissue['gm']
            img[brain & (r < wm_edge + wm_amp * wm_field(u, v, z))] = tissue['wm']
            if deep:
                for dx, dy, rad in deep_params:
                    img[brain & (((u - dx) / rad) ** 2 + ((v - dy) / (rad * 1.4)) ** 2 + ((z - 5.0) / (rad * 1.2)) ** 2 < 1.0)] = tissue['deep']
            vent = np.zeros((rows, cols), dtype=bool)
            for vx, tilt, wid in vents:
                du, dv = u - vx, v - vy
                ru = du * math.cos(tilt) + dv * math.sin(tilt)
                rv = -du * math.sin(tilt) + dv * math.cos(tilt)
                vent |= (ru / (wid * vent_scale)) ** 2 + (rv / 22.0) ** 2 + ((z - vz) / (11.0 * vent_scale)) ** 2 < 1.0
            vent &= brain
            img[vent] = tissue['csf']
            if blobs:
                _paint_blobs(img, blobs, u, v, z, brain, r < head.r_skull_in, to_pixel, spacing)
            tissue_ok = brain & ~vent
            for li, les in enumerate(rand_lesions):
                q, qs = les.q(u, v, z)
                core = (q < 1.0) & tissue_ok
                if les.shell_factor > 0:
                    img[(qs < les.shell_factor) & (q >= 1.0) & tissue_ok & (q < les.shell_factor)] = les.values['shell']
                if core.any():
                    fld = les.texture(u - les.center[0], v - les.center[1], z - les.center[2])
                    tex = 1.0 + les.texture_amp * fld
                    if les.relative and modality == 'CT':
                        under = np.minimum(img, tissue['wm']) if les.collapse else img
                        img[core] = (under + les.relative * tex)[core]
                    elif les.relative:
                        img[core] = (img * (1.0 + les.relative * tex))[core]
                    else:
                        base = tissue['gm']
                        img[core] = (base + (les.values['core'] - base) * tex)[core]
                    if les.inner_q > 0:
                        img[core & (q < les.inner_q)] = les.values['inner']
                    if les.dark_rim_q > 0:
                        img[core & (q >= les.dark_rim_q)] = les.values['inner']
                    if les.calcified is not None:
                        img[core & (fld > 1.6)] = les.calcified
                cores[li][k] += core.astype(np.float32) / sub
            acc += img
        img = _gaussian_blur(acc / sub, blur)
        if modality == 'CT':
            if cupping:
                rr = head.radius(u, v, z0 + thickness * (k + 0.5))
                img = img + (cupping * (1 - np.clip(rr, 0, 1) ** 2) * (rr < 1)).astype(np.float32)
            n = rng.normal(0.0, 1.0, size=(rows, cols)).astype(np.float32)
            if noise_kind == 'correlated':
                n = _gaussian_blur(n, corr_sigma)
                n /= max(float(n.std()), 1e-6)
            img = img + noise_sd * n
        else:
            img = img * (1.0 + bias_amp * bias(u, v, z0 + thickness * (k + 0.5)))
            n1 = rng.normal(0.0, 1.0, size=(rows, cols)).astype(np.float32)
            if noise_kind == 'correlated':
                n1 = _gaussian_blur(n1, corr_sigma)
                n1 /= max(float(n1.std()), 1e-6)
            if noise_kind == 'rician':
                n2 = rng.normal(0.0, 1.0, size=(rows, cols)).astype(np.float32)
                img = np.sqrt((img + noise_sd * n1) ** 2 + (noise_sd * n2) ** 2)
            else:
                img = np.abs(img + noise_sd * n1)
            img = img * gain
        out[k] = img

    min_px = MIN_TRUTH_AREA_MM2 / (spacing * spacing)
    lesions: list[Lesion] = []
    for les, frac in zip(rand_lesions, cores):
        boxes = []
        for k in range(n_slices):
            m = frac[k] >= 0.5
            area = int(m.sum())
            if area < min_px:
                continue
            rr = np.flatnonzero(m.any(axis=1))
            cc = np.flatnonzero(m.any(axis=0))
            boxes.append(SliceBox(k, int(cc[0]), int(rr[0]), int(cc[-1] - cc[0] + 1), int(rr[-1] - rr[0] + 1), area))
        if boxes:
            lesions.append(Lesion(kind=les.kind, label=KIND_TO_LABEL[les.kind],
                                  center_mm=(float(les.center[0]), float(les.center[1]), float(les.center[2])), boxes=boxes))

    if modality == 'CT':
        intercept, slope = -1024.0, 1.0
        stored = np.clip(np.rint(out - intercept), 0, 4095).astype(np.uint16)
        wc, ww = 40.0, 80.0
    else:
        intercept, slope = 0.0, 1.0
        stored = np.clip(np.rint(out), 0, 65535).astype(np.uint16)
        lo, hi = np.percentile(stored, [1.0, 99.5])
        wc, ww = float((lo + hi) / 2), float(max(hi - lo, 1.0))
    return Series(seed=seed, modality=modality, stored=stored, slope=slope, intercept=intercept,
                  pixel_spacing_mm=spacing, slice_thickness_mm=thickness, z0_mm=z0 + thickness / 2,
                  window_center=wc, window_width=ww, lesions=lesions)


# ---------------------------------------------------------------------------------------------
# DICOM output.


@dataclasses.dataclass
class SeriesUids:
    patient_id: str
    study: str
    series: str
    frame_of_reference: str
    instances: list[str]


def series_uids(series: Series) -> SeriesUids:
    s = series.seed
    return SeriesUids(
        patient_id=f'PHANTOM-{s}',
        study=_uid('study', s),
        series=_uid('series', s, series.modality),
        frame_of_reference=_uid('for', s),
        instances=[_uid('instance', s, series.modality, k) for k in range(series.stored.shape[0])],
    )


def write_dicom_series(series: Series, out_dir: str) -> SeriesUids:
    """Write one file per slice: CT Image Storage or MR Image Storage, explicit VR little endian."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.sequence import Sequence  # noqa: F401  (kept for readers extending the writer)
    from pydicom.uid import UID

    uids = series_uids(series)
    os.makedirs(out_dir, exist_ok=True)
    n, rows, cols = series.stored.shape
    sop_class = CT_IMAGE_STORAGE if series.modality == 'CT' else MR_IMAGE_STORAGE
    # A fixed synthetic date: the phantoms are not acquisitions, and a constant keeps files
    # reproducible byte for byte.
    date, time = '20240101', '120000'
    for k in range(n):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = UID(sop_class)
        meta.MediaStorageSOPInstanceUID = UID(uids.instances[k])
        meta.TransferSyntaxUID = UID(EXPLICIT_VR_LE)
        meta.ImplementationClassUID = UID(IMPLEMENTATION_CLASS_UID)
        meta.ImplementationVersionName = IMPLEMENTATION_VERSION
        path = os.path.join(out_dir, f'IM{k + 1:04d}.dcm')
        ds = FileDataset(path, {}, file_meta=meta, preamble=b'\0' * 128)
        ds.is_little_endian = True
        ds.is_implicit_VR = False
        ds.SpecificCharacterSet = 'ISO_IR 100'
        ds.ImageType = ['DERIVED', 'SECONDARY', 'AXIAL']
        ds.SOPClassUID = sop_class
        ds.SOPInstanceUID = uids.instances[k]
        ds.StudyDate = date
        ds.SeriesDate = date
        ds.ContentDate = date
        ds.StudyTime = time
        ds.SeriesTime = time
        ds.ContentTime = time
        ds.AccessionNumber = f'PH{series.seed % 10_000_000:07d}'
        ds.Modality = series.modality
        ds.Manufacturer = 'mia phantom generator'
        ds.ReferringPhysicianName = ''
        ds.StudyDescription = 'SYNTHETIC PHANTOM HEAD - NOT A PATIENT'
        ds.SeriesDescription = f'Synthetic {series.modality} head phantom, seed {series.seed}'
        ds.PatientName = f'PHANTOM^{series.seed}'
        ds.PatientID = uids.patient_id
        ds.PatientBirthDate = ''
        ds.PatientSex = 'O'
        ds.BodyPartExamined = 'HEAD'
        ds.SliceThickness = f'{series.slice_thickness_mm:g}'
        ds.StudyInstanceUID = uids.study
        ds.SeriesInstanceUID = uids.series
        ds.StudyID = f'{series.seed % 100_000}'
        ds.PatientPosition = 'HFS'
        ds.SeriesNumber = 1 if series.modality == 'CT' else 2
        ds.AcquisitionNumber = 1
        ds.InstanceNumber = k + 1
        ds.PatientOrientation = ['L', 'P']
        # Axial slices: row direction +x, column direction +y; the position is the centre of
        # the top-left pixel (PS3.3 C.7.6.2.1.1).
        half = (cols - 1) / 2 * series.pixel_spacing_mm
        z = series.z0_mm + k * series.slice_thickness_mm
        ds.ImagePositionPatient = [f'{-half:.4f}', f'{-half:.4f}', f'{z:.4f}']
        ds.ImageOrientationPatient = ['1', '0', '0', '0', '1', '0']
        ds.FrameOfReferenceUID = uids.frame_of_reference
        ds.PositionReferenceIndicator = ''
        ds.SliceLocation = f'{z:.4f}'
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = 'MONOCHROME2'
        ds.Rows = rows
        ds.Columns = cols
        ds.PixelSpacing = [f'{series.pixel_spacing_mm:.6f}', f'{series.pixel_spacing_mm:.6f}']
        ds.BitsAllocated = 16
        ds.BitsStored = 16
        ds.HighBit = 15
        ds.PixelRepresentation = 0
        ds.WindowCenter = f'{series.window_center:.1f}'
        ds.WindowWidth = f'{series.window_width:.1f}'
        if series.modality == 'CT':
            # The MR Image IOD has no Modality LUT (PS3.3 C.8.3.1): readers must treat MR
            # stored values as the modality values, so rescale is written for CT only.
            ds.RescaleIntercept = f'{series.intercept:g}'
            ds.RescaleSlope = f'{series.slope:g}'
            ds.RescaleType = 'HU'
            ds.KVP = '120'
            ds.ConvolutionKernel = 'STANDARD'
        else:
            ds.ScanningSequence = ['SE', 'IR']
            ds.SequenceVariant = ['SK']
            ds.ScanOptions = ''
            ds.MRAcquisitionType = '2D'
            ds.RepetitionTime = '9000'
            ds.EchoTime = '90'
            ds.InversionTime = '2500'
            ds.EchoTrainLength = '16'
            ds.MagneticFieldStrength = '1.5'
            ds.ImagedNucleus = '1H'
        ds.PixelData = np.ascontiguousarray(series.stored[k]).astype('<u2').tobytes()
        ds.save_as(path, write_like_original=False)
    return uids


def truth_record(series: Series, uids: SeriesUids | None = None) -> dict[str, Any]:
    """The ground truth of one series in the shape the tests and the evaluation read."""
    uids = uids or series_uids(series)
    lesions = []
    for les in series.lesions:
        key = les.key_box()
        lesions.append({
            'label': les.label,
            'kind': les.kind,
            'instance_uid': uids.instances[key.slice_index],
            'frame': 0,
            'slice_index': key.slice_index,
            'box': {'x': key.x, 'y': key.y, 'width': key.width, 'height': key.height},
            'slices': [{'slice_index': b.slice_index, 'instance_uid': uids.instances[b.slice_index], 'frame': 0,
                        'box': {'x': b.x, 'y': b.y, 'width': b.width, 'height': b.height}} for b in les.boxes],
        })
    n, rows, cols = series.stored.shape
    return {
        'seed': series.seed,
        'modality': series.modality,
        'scan_uid': uids.series,
        'study_uid': uids.study,
        'patient_id': uids.patient_id,
        'rows': rows,
        'columns': cols,
        'slices': n,
        'pixel_spacing_mm': series.pixel_spacing_mm,
        'instance_uids': uids.instances,
        'lesions': lesions,
    }


def write_raw(series: Series, raw_dir: str, uids: SeriesUids) -> dict[str, str]:
    """Float32 little-endian modality values (slices x rows x cols) plus a JSON sidecar, so tests
    can feed exact pixel values to the model without a DICOM reader."""
    os.makedirs(raw_dir, exist_ok=True)
    stem = f'series-{series.seed}'
    raw_path = os.path.join(raw_dir, stem + '.f32')
    series.values.astype('<f4').tofile(raw_path)
    side = truth_record(series, uids)
    side['raw_file'] = os.path.basename(raw_path)
    side['dtype'] = 'float32le'
    side['shape'] = list(series.stored.shape)
    json_path = os.path.join(raw_dir, stem + '.json')
    with open(json_path, 'w') as fh:
        json.dump(side, fh, indent=1)
    return {'raw': raw_path, 'json': json_path}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description='Write synthetic head phantom series as DICOM (NOT FOR CLINICAL USE).')
    p.add_argument('--out', required=True, help='output directory (one sub-folder per series)')
    p.add_argument('--series', type=int, default=1, help='number of series')
    p.add_argument('--seed', type=int, default=0, help='seed of the first series; series i uses seed+i')
    p.add_argument('--modality', choices=['MR', 'CT', 'both'], default='both',
                   help='both: even-indexed series CT, odd MR')
    p.add_argument('--size', type=int, default=256, help='rows = columns of each slice')
    p.add_argument('--slices', type=int, default=None, help='slices per series (default: drawn from the seed)')
    p.add_argument('--kinds', default=None,
                   help='force lesion kinds, comma separated (tumor,hemorrhage,infarct) or "none"')
    p.add_argument('--truth', default=None, help='write ground truth JSON here')
    p.add_argument('--raw', default=None, help='also write float32 modality values + JSON sidecars here')
    p.add_argument('--randomize', action='store_true',
                   help='domain-randomized phantoms (generate_randomized_series) instead of family A')
    p.add_argument('--no-dicom', action='store_true', help='skip DICOM output (with --raw)')
    args = p.parse_args(argv)

    kinds: list[str] | None = None
    if args.kinds is not None:
        kinds = [] if args.kinds == 'none' else [k.strip() for k in args.kinds.split(',') if k.strip()]
    if args.seed >= SEED_TRAIN_BASE and args.seed < SEED_TEST_BASE:
        print(f'warning: seeds {SEED_TRAIN_BASE}..{SEED_TEST_BASE - 1} are the training range', file=sys.stderr)

    records = []
    for i in range(args.series):
        seed = args.seed + i
        modality = args.modality if args.modality != 'both' else ('CT' if i % 2 == 0 else 'MR')
        if args.randomize:
            series = generate_randomized_series(seed, modality, rows=args.size, kinds=kinds, n_slices=args.slices)
        else:
            series = generate_series(seed, modality, size=args.size, kinds=kinds, n_slices=args.slices)
        uids = series_uids(series)
        if not args.no_dicom:
            write_dicom_series(series, os.path.join(args.out, f'series-{seed}-{modality}'))
        if args.raw:
            write_raw(series, args.raw, uids)
        records.append(truth_record(series, uids))
    if args.truth:
        with open(args.truth, 'w') as fh:
            json.dump({'generator': 'mia-phantom-detector/phantoms.py', 'not_for_clinical_use': True,
                       'series': records}, fh, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
