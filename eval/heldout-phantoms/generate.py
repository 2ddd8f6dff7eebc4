#!/usr/bin/python3
"""Held-out head phantoms for evaluating mia detectors. NOT FOR CLINICAL USE.

Written independently of the training generator (see README.md beside this file): the test
set of record must not share shapes, textures or lesion models with what the model saw.

Every series is a pure function of its seed (numpy PCG64): the same seed gives the same bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian

GENERATOR = "eval/heldout-phantoms/generate.py"
LABELS = {"tumor": "tumor_detected", "hemorrhage": "hemorrhage_detected", "infarct": "infarct_detected"}
CT_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.2"
MR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.4"
# A box is only truth where a reader could call it: equivalent diameter of 6 mm (brief).
MIN_EQUIVALENT_DIAMETER_MM = 6.0
F32 = np.float32


# ----------------------------------------------------------------------------- identifiers

def uid_for(seed: int, role: str) -> str:
    """2.25 UID (PS3.5 B.2) from a UUID made of sha256(seed, role): stable across runs."""
    digest = hashlib.sha256(f"mia-heldout:{seed}:{role}".encode()).digest()
    return "2.25." + str(uuid.UUID(bytes=digest[:16], version=4).int)


IMPLEMENTATION_UID = uid_for(0, "implementation-class")


# ----------------------------------------------------------------------------- parameters

@dataclass
class Head:
    half_width: float          # mm, left-right semi-axis at the widest level
    front: float               # mm, anterior semi-axis
    back: float                # mm, posterior semi-axis
    lr_asym: float             # relative width difference left vs right
    taper: float               # how much narrower the forehead is than the occiput
    squareness: float          # squircle factor of the axial outline (0 = ellipse)
    harmonics: np.ndarray      # (k, amplitude, phase) rows: Fourier wobble of the outline
    crown: float               # w of the widest level
    dome: float                # mm from the widest level up to the vertex
    neck: float                # vertical scale of the taper below the widest level
    scalp: float               # mm
    scalp_harm: np.ndarray
    skull: float               # mm, mean calvarial thickness
    skull_harm: np.ndarray
    outer_table: float         # fraction of the skull that is outer table
    inner_table: float
    csf_rim: float             # mm of subarachnoid CSF over the convexity
    cortex: float              # mm of grey matter
    sulcus_waves: np.ndarray   # (n, 4): wave vector (rad/mm) and phase
    sulcus_width: float        # in units of the wave field
    sulcus_depth: float        # mm
    fissure: float             # mm, interhemispheric fissure width
    midline_bend: float        # mm of midline curvature
    vent_scale: float
    vent_asym: float
    floor_shift: float         # mm, moves the skull base up or down
    choroid_calc: bool
    pineal_calc: bool
    falx_calc: bool


@dataclass
class Lesion:
    kind: str
    centre: np.ndarray         # head frame, mm
    radius: float              # mm, nominal
    bound: float               # mm, radius of a sphere holding the lesion and its oedema
    rot: np.ndarray            # 3x3, lesion frame -> head frame
    stretch: np.ndarray        # semi-axis factors in the lesion frame
    lobes: np.ndarray          # (n, 5): direction(3), frequency, amplitude... see shape_radius
    phases: np.ndarray
    variant: str               # tumor: solid|ring ; hemorrhage: plain|rimmed ; infarct: wedge|deep
    wall: float = 0.0          # mm, ring thickness
    calcs: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # centre(3), radius
    oedema: float = 0.0        # mm reach of oedema beyond the lesion
    apex: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.zeros(3))
    length: float = 0.0
    half_angles: tuple[float, float] = (0.0, 0.0)
    values: dict[str, float] = field(default_factory=dict)
    push: float = 0.0          # mm, mass effect at the lesion centre (0: none)
    hemisphere: float = 0.0    # +1/-1: confined to that side of the falx (infarcts, haemorrhages); 0: free
    midline_bend: float = 0.0


@dataclass
class Series:
    seed: int
    modality: str
    rows: int
    spacing: float             # mm, in-plane pixel spacing
    thickness: float           # mm
    slices: int
    z_first: float             # patient z of slice 0
    origin: np.ndarray         # head origin in patient coordinates
    rot: np.ndarray            # head frame -> patient
    head: Head
    tissue: dict[str, float]
    lesions: list[Lesion]
    noise: float               # CT: HU std; MR: fraction of white matter signal
    noise_kernel: float        # CT: centre weight of the smoothing kernel (lower = blotchier)
    ct_signed: bool
    ct_intercept: int
    bits_stored: int
    mr_scale: float
    bias: np.ndarray           # MR bias field coefficients
    study_date: str
    study_time: str
    window: tuple[float, float]
    field_strength: float


def rotation(yaw: float, pitch: float, roll: float) -> np.ndarray:
    cy, sy = math.cos(yaw), math.sin(yaw)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cr, sr = math.cos(roll), math.sin(roll)
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, cp, -sp], [0, sp, cp]])
    ry = np.array([[cr, 0, sr], [0, 1, 0], [-sr, 0, cr]])
    return rz @ rx @ ry


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    return q * np.sign(np.diag(r))


def draw_head(rng: np.random.Generator) -> Head:
    ks = np.arange(2, 6)
    harm = np.stack([ks, rng.uniform(0, 0.035, ks.size) / (ks - 1) ** 0.7, rng.uniform(0, 2 * np.pi, ks.size)], 1)
    n_waves = 7
    direction = rng.standard_normal((n_waves, 3))
    direction[:, 2] *= 0.7  # gyri run a little more horizontally than vertically on axial cuts
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    wavelength = rng.uniform(16, 34, n_waves)
    waves = np.concatenate([direction * (2 * np.pi / wavelength)[:, None], rng.uniform(0, 2 * np.pi, (n_waves, 1))], 1)
    atrophy = rng.beta(1.6, 3.0)  # 0 young, 1 markedly atrophic
    return Head(
        half_width=rng.uniform(64, 77), front=rng.uniform(82, 95), back=rng.uniform(86, 101),
        lr_asym=rng.uniform(-0.04, 0.04), taper=rng.uniform(0.0, 0.14), squareness=rng.uniform(0.0, 0.7),
        harmonics=harm, crown=rng.uniform(-4, 10), dome=rng.uniform(76, 92), neck=rng.uniform(105, 135),
        scalp=rng.uniform(3.5, 7.0),
        scalp_harm=np.array([rng.uniform(0, 0.3), rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.2), rng.uniform(0, 2 * np.pi)]),
        skull=rng.uniform(4.5, 7.5),
        skull_harm=np.array([rng.uniform(0.05, 0.25), rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.15), rng.uniform(0, 2 * np.pi)]),
        outer_table=rng.uniform(0.22, 0.35), inner_table=rng.uniform(0.18, 0.3),
        csf_rim=0.8 + 2.6 * atrophy, cortex=rng.uniform(2.4, 3.8), sulcus_waves=waves,
        sulcus_width=0.035 + 0.07 * atrophy, sulcus_depth=rng.uniform(11, 22),
        fissure=1.0 + 3.0 * atrophy, midline_bend=rng.uniform(-3, 3),
        vent_scale=0.65 + 1.3 * atrophy + rng.uniform(-0.1, 0.2), vent_asym=rng.uniform(-0.15, 0.15),
        floor_shift=rng.uniform(-6, 6), choroid_calc=bool(rng.random() < 0.6),
        pineal_calc=bool(rng.random() < 0.5), falx_calc=bool(rng.random() < 0.15),
    )


def draw_tissue(rng: np.random.Generator, modality: str) -> dict[str, float]:
    if modality == "CT":
        wm = rng.uniform(23, 31)
        return {
            "air": -1000.0, "fat": rng.uniform(-110, -70), "skin": rng.uniform(25, 50),
            "outer": rng.uniform(800, 1800), "diploe": rng.uniform(350, 750), "inner": rng.uniform(700, 1650),
            "csf": rng.uniform(3, 12), "wm": wm, "gm": wm + rng.uniform(7, 14), "deep": wm + rng.uniform(5, 11),
            "falx": rng.uniform(45, 75), "calc": rng.uniform(140, 320), "base_bone": rng.uniform(650, 1100),
            "marrow": rng.uniform(180, 420), "sinus": rng.uniform(-980, -900), "globe": rng.uniform(5, 15),
            "lens": rng.uniform(70, 110), "muscle": rng.uniform(40, 60), "texture": rng.uniform(0.6, 2.0),
        }
    # FLAIR-like: CSF and vitreous suppressed, white matter darker than grey, fat bright.
    return {
        "air": 0.0, "fat": rng.uniform(1.5, 2.2), "skin": rng.uniform(0.6, 0.9),
        "outer": rng.uniform(0.03, 0.08), "diploe": rng.uniform(1.0, 1.7), "inner": rng.uniform(0.03, 0.08),
        "csf": rng.uniform(0.08, 0.22), "wm": 1.0, "gm": rng.uniform(1.18, 1.42), "deep": rng.uniform(1.08, 1.25),
        "falx": rng.uniform(0.15, 0.35), "calc": rng.uniform(0.05, 0.2), "base_bone": rng.uniform(0.05, 0.15),
        "marrow": rng.uniform(0.9, 1.5), "sinus": 0.0, "globe": rng.uniform(0.05, 0.2),
        "lens": rng.uniform(0.4, 0.8), "muscle": rng.uniform(0.5, 0.8), "texture": rng.uniform(0.01, 0.035),
    }


def draw_series(seed: int, modality: str, kinds: list[str]) -> Series:
    rng = np.random.Generator(np.random.PCG64(seed))
    head = draw_head(rng)
    tissue = draw_tissue(rng, modality)
    yaw = math.radians(rng.uniform(-9, 9))
    pitch = math.radians(rng.uniform(-14, 10))
    roll = math.radians(rng.uniform(-4, 4))
    rot = rotation(yaw, pitch, roll)
    # The field of view holds the whole head: largest reach of the outline plus scalp and margin.
    reach = max(head.front, head.back) * (1 + head.harmonics[:, 1].sum()) + 8
    offset_xy = rng.uniform(-8, 8, 2)
    fov_min = 2 * (reach + float(np.abs(offset_xy).max())) + 6
    rows, spacing = 0, 0.0
    for _ in range(32):
        rows = int(rng.choice([256, 320, 384, 512]))
        lo, hi = max(0.4, fov_min / rows), min(1.0, 300.0 / rows)
        if lo <= hi:
            spacing = round(float(rng.uniform(lo, hi)), 4)
            break
    if spacing == 0.0:
        rows, spacing = 512, round(max(0.4, fov_min / 512) + 0.01, 4)
    thickness = round(float(rng.choice([2.5, 3.0, 4.0, 5.0, 6.0, rng.uniform(2.5, 6.0)])), 3)
    slices = int(rng.integers(12, 41))
    slices = min(slices, int(175 // thickness))
    vertex = head.crown + head.dome
    top = vertex + rng.uniform(-12, 6)
    # Never below the orbits: fewer slices rather than a slab that runs off the top of the head.
    slices = max(min(slices, int((top + 60.0) // thickness) + 1), 12)
    bottom = top - (slices - 1) * thickness
    table = rng.uniform(-250, 150)
    origin = np.array([offset_xy[0], offset_xy[1], table])
    z_first = table + bottom
    if modality == "CT":
        ct_signed = bool(rng.random() < 0.4)
        ct_intercept = int(rng.choice([-1024, -1000]))
        bits = 16 if ct_signed else int(rng.choice([12, 16]))
        noise = rng.uniform(2, 12)
        window = (float(rng.choice([35, 40, 40, 45])), float(rng.choice([80, 80, 90, 100])))
        mr_scale = 0.0
        bias = np.zeros(6)
    else:
        ct_signed, ct_intercept = False, 0
        bits = int(rng.integers(12, 17))
        noise = rng.uniform(0.015, 0.06)
        # White matter lands anywhere from 8 % to 25 % of the stored range (no fixed scale), and
        # the brightest tissue under the strongest bias field still fits below saturation.
        mr_scale = float(rng.uniform(0.08, 0.25) * (2 ** bits - 1))
        bias = rng.uniform(-1, 1, 6) * np.array([0.18, 0.18, 0.12, 0.08, 0.08, 0.06])
        window = (0.0, 0.0)
    day = int(rng.integers(0, 3650))
    date = time.strftime("%Y%m%d", time.gmtime(946684800 + day * 86400))
    secs = int(rng.integers(6 * 3600, 22 * 3600))
    series = Series(
        seed=seed, modality=modality, rows=rows, spacing=spacing, thickness=thickness, slices=slices,
        z_first=z_first, origin=origin, rot=rot, head=head, tissue=tissue, lesions=[], noise=noise,
        noise_kernel=rng.uniform(0.3, 1.0), ct_signed=ct_signed, ct_intercept=ct_intercept, bits_stored=bits,
        mr_scale=mr_scale, bias=bias, study_date=date,
        study_time=f"{secs // 3600:02d}{secs % 3600 // 60:02d}{secs % 60:02d}", window=window,
        field_strength=float(rng.choice([1.5, 3.0])),
    )
    if kinds:
        count = int(rng.choice([0, 1, 2, 3], p=[0.15, 0.45, 0.27, 0.13]))
        for _ in range(count):
            lesion = place_lesion(rng, series, str(rng.choice(kinds)))
            if lesion is not None:
                series.lesions.append(lesion)
    return series


# ----------------------------------------------------------------------------- anatomy

def soft(x: np.ndarray, width: float) -> np.ndarray:
    """Partial-volume membership of the side where x > 0, blended over `width` mm."""
    y = x * F32(1.0 / width) + F32(0.5)
    np.maximum(y, F32(0.0), out=y)
    return np.minimum(y, F32(1.0), out=y)


def lerp(a: np.ndarray, b: np.ndarray | float, t: np.ndarray) -> np.ndarray:
    return a + (b - a) * t


def head_depth(h: Head, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth in mm below the scalp surface, measured along the ray from the head centre; and azimuth.

    The axial outline is a homogeneous squircle (x^2 + y^2 - s x^2 y^2 / (x^2 + y^2)), boxier than
    an ellipse as s grows, with different front, back, left and right semi-axes, a narrower
    forehead and a Fourier wobble; the vault above the widest level is a dome, the head below
    it narrows slowly.
    """
    theta = np.arctan2(v, u)
    half_w = np.where(u > 0, F32(h.half_width * (1 + h.lr_asym)), F32(h.half_width * (1 - h.lr_asym)))
    half_w *= 1 + h.taper * np.minimum(np.maximum(v * F32(1 / h.back), F32(-1)), F32(1))
    un2 = (u / half_w) ** 2
    vn2 = (v / np.where(v < 0, F32(h.front), F32(h.back))) ** 2
    r2 = un2 + vn2 + F32(1e-6)
    n2 = r2 - h.squareness * un2 * vn2 / r2
    wobble = 1.0
    for k, amp, phase in h.harmonics:
        wobble = wobble + amp * np.cos(k * theta + phase)
    dw = w - h.crown
    wn2 = (dw / np.where(dw > 0, F32(h.dome), F32(h.neck))) ** 2
    rho = np.sqrt(n2 / (wobble * wobble) + wn2)
    dist = np.sqrt(u * u + v * v + dw * dw)
    return dist * (1 / np.maximum(rho, F32(1e-3)) - 1), theta


def floor_level(h: Head, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Height of the cranial floor: anterior fossa high, middle lower, posterior fossa lowest."""
    au = np.abs(u)
    # The lesser sphenoid wings sweep back laterally; the petrous ridges run back and out.
    front_to_middle = 1 / (1 + np.exp((v + 32 - 0.25 * au) / 4))
    posterior = 1 / (1 + np.exp(-(v + 6 - 0.45 * au) / 4))
    middle = -48 + 20 * np.exp(-(u / 14) ** 2)                   # sella rises in the midline
    level = front_to_middle * -24 + (1 - front_to_middle) * middle
    level = level * (1 - posterior) + posterior * -66
    return level + h.floor_shift


def capsule_sd(u, v, w, a, b, r):
    """Signed distance to a tube of radius r from point a to point b."""
    du, dv, dw = u - a[0], v - a[1], w - a[2]
    ba = (b[0] - a[0], b[1] - a[1], b[2] - a[2])
    t = np.clip((du * ba[0] + dv * ba[1] + dw * ba[2]) / (ba[0] ** 2 + ba[1] ** 2 + ba[2] ** 2), 0, 1)
    ex, ey, ez = du - t * ba[0], dv - t * ba[1], dw - t * ba[2]
    return np.sqrt(ex * ex + ey * ey + ez * ez) - r


def ventricles(h: Head, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Signed distance (mm, negative inside) to the ventricular system, roughly."""
    s = h.vent_scale
    best = np.full(u.shape, 99.0, dtype=F32)
    for side in (-1.0, 1.0):
        k = s * (1 + side * h.vent_asym)
        v0, v1 = -27.0 - 2 * k, 20.0
        t = np.clip(v, v0, v1)
        f = (t - v0) / (v1 - v0)
        uc = side * (3.0 + 1.5 * k + 11 * f * f)
        wc = 12 + 6 * np.sin(np.pi * f)
        au = (3.0 + 2.5 * f) * k + 1.0
        aw = (5.0 + 2.0 * np.sin(np.pi * f)) * k + 1.0
        ell = ((u - uc) / au) ** 2 + ((w - wc) / aw) ** 2 + ((v - t) / (3 + 2 * k)) ** 2
        best = np.minimum(best, (np.sqrt(ell) - 1) * np.minimum(au, aw))
        atrium = (side * (3.0 + 1.5 * k + 11), v1, 12.0)
        # occipital horn back and down; temporal horn down and forward into the temporal lobe
        best = np.minimum(best, capsule_sd(u, v, w, atrium, (atrium[0] + side * 4, v1 + 20, 2.0), 1.2 * k + 0.5))
        best = np.minimum(best, capsule_sd(u, v, w, (atrium[0], v1 - 2, 4.0),
                                           (atrium[0] + side * 9, -12.0, -26.0 + h.floor_shift), 0.9 * k + 0.6))
    third = (u / (0.6 + 0.9 * s)) ** 2 + ((v - 2) / 13) ** 2 + ((w + 3) / 9) ** 2
    best = np.minimum(best, (np.sqrt(third) - 1) * (0.6 + 0.9 * s))
    fourth = (u / (5 + 2 * s)) ** 2 + ((v - 30) / 3.5) ** 2 + ((w + 42 - h.floor_shift) / 6) ** 2
    best = np.minimum(best, (np.sqrt(fourth) - 1) * 3.5)
    return best


def ellipsoid_sd(u, v, w, centre, axes) -> np.ndarray:
    e = ((u - centre[0]) / axes[0]) ** 2 + ((v - centre[1]) / axes[1]) ** 2 + ((w - centre[2]) / axes[2]) ** 2
    return (np.sqrt(e) - 1) * min(axes)


@dataclass
class Anatomy:
    value: np.ndarray          # tissue value (HU or relative FLAIR signal)
    intracranial: np.ndarray   # membership of the space inside the inner table (and above the floor)
    parenchyma: np.ndarray     # membership of brain tissue (not CSF)
    white: np.ndarray          # white-matter share of the parenchyma
    head: np.ndarray           # membership of anything but air


def anatomy(s: Series, u: np.ndarray, v: np.ndarray, w: np.ndarray, pw: float) -> Anatomy:
    """Tissue at head-frame points (mm). Works on any array shape: slices and point queries alike.

    Each stage works only on the points that can hold its tissue (head, then the cranial cavity,
    then regions near the deep structures), which keeps a 512 x 512 slice cheap.
    """
    h, t = s.head, s.tissue
    shape = u.shape
    u, v, w = (np.ascontiguousarray(x, dtype=F32).ravel() for x in (u, v, w))
    n = u.size
    val = np.full(n, t["air"], dtype=F32)
    m_ic = np.zeros(n, dtype=F32)
    m_par = np.zeros(n, dtype=F32)
    white = np.zeros(n, dtype=F32)
    depth, theta = head_depth(h, u, v, w)
    m_head = soft(depth, pw)
    i1 = np.flatnonzero(depth > -pw)
    if i1.size:
        v1, m1, p1, wh1 = head_tissue(s, u[i1], v[i1], w[i1], depth[i1], theta[i1], pw)
        val[i1], m_ic[i1], m_par[i1], white[i1] = v1, m1, p1, wh1
    return Anatomy(value=val.reshape(shape), intracranial=m_ic.reshape(shape), parenchyma=m_par.reshape(shape),
                   white=white.reshape(shape), head=m_head.reshape(shape))


def on(idx: np.ndarray, fn, default: float, n: int, *arrays: np.ndarray) -> np.ndarray:
    """fn evaluated only at idx of the given arrays; default elsewhere."""
    out = np.full(n, default, dtype=F32)
    if idx.size:
        out[idx] = fn(*(a[idx] for a in arrays))
    return out


def head_tissue(s: Series, u, v, w, depth, theta, pw: float):
    h, t = s.head, s.tissue
    n = u.size
    au = np.abs(u)
    scalp = h.scalp * (1 + h.scalp_harm[0] * np.cos(theta + h.scalp_harm[1]))
    skull = h.skull * (1 + h.skull_harm[0] * np.cos(theta + h.skull_harm[1]) + h.skull_harm[2] * np.cos(2 * theta + h.skull_harm[3]))
    # Occipital protuberance thick, squamous temporal bone thin.
    skull = skull * (1 + 0.45 * np.exp(-((v - h.back + 10) * F32(1 / 18)) ** 2 - ((w - h.crown + 15) * F32(1 / 18)) ** 2)
                     - 0.35 * np.exp(-((au - h.half_width + 5) * F32(1 / 15)) ** 2 - (v * F32(1 / 30)) ** 2 - ((w + 15) * F32(1 / 20)) ** 2))
    d1 = scalp
    d2 = d1 + skull * h.outer_table
    d4 = d1 + skull
    d3 = d4 - skull * h.inner_table
    d5 = d4 + h.csf_rim

    val = lerp(np.full(n, t["air"], dtype=F32), t["skin"], soft(depth, pw))
    fat_band = soft(depth - 0.35 * scalp, pw) * soft(0.8 * scalp - depth, pw)
    val = lerp(val, t["fat"], fat_band * F32(0.85))
    val = lerp(val, t["outer"], soft(depth - d1, pw))
    # Trabecular texture of the diploe.
    trab = 0.8 + 0.2 * np.cos(0.9 * u + 1.3 * w + 2 * np.cos(0.3 * v)) * np.cos(1.1 * v - 0.7 * w)
    diploe = t["diploe"] * trab + t["outer"] * 0.15 * (1 - trab)
    val = lerp(val, diploe, soft(depth - d2, pw))
    val = lerp(val, t["inner"], soft(depth - d3, pw))

    floor = floor_level(h, u, v)
    above = soft(w - floor, pw)
    m_ic = soft(depth - d4, pw) * above
    bone_val = val
    val = lerp(bone_val, t["csf"], m_ic)
    m_par = np.zeros(n, dtype=F32)
    white = np.zeros(n, dtype=F32)

    i2 = np.flatnonzero(m_ic > 0)
    if i2.size:
        ub, vb, wb = displaced(s, u[i2], v[i2], w[i2])
        bv, bm, bw = brain_tissue(s, ub, vb, wb, depth[i2] - d5[i2], pw)
        val[i2] = lerp(bone_val[i2], bv, m_ic[i2])
        bm *= m_ic[i2]
        m_par[i2] = bm
        white[i2] = bw * bm

    # Below the cranial floor: a bony plate, the petrous ridges and clivus, sinuses and the
    # soft tissue of the face and skull base; the calvarial wall stays around it.
    below = (1 - above) * soft(depth - d4, pw)
    i3 = np.flatnonzero(below > 0)
    if i3.size:
        val[i3] = lerp(val[i3], skull_base(s, u[i3], v[i3], w[i3], floor[i3], trab[i3], pw), below[i3])
    i4 = np.flatnonzero((w < -15 + h.floor_shift) & (v < -h.front + 56) & (au > 12) & (au < 50))
    if i4.size:
        val[i4] = orbits(s, u[i4], v[i4], w[i4], depth[i4], val[i4], pw)
    return val, m_ic, m_par, white


def displaced(s: Series, u, v, w):
    """Mass effect: brain near a large tumour or bleed is pushed away from it (ventricles squeezed,
    midline shifted). Returns where to sample the undisturbed brain for each point."""
    for lesion in s.lesions:
        if lesion.push <= 0:
            continue
        reach = 2.5 * lesion.radius
        c = lesion.centre
        near = np.flatnonzero((np.abs(u - c[0]) < 2 * reach) & (np.abs(v - c[1]) < 2 * reach) & (np.abs(w - c[2]) < 2 * reach))
        if not near.size:
            continue
        du, dv, dw = u[near] - F32(c[0]), v[near] - F32(c[1]), w[near] - F32(c[2])
        d = np.sqrt(du * du + dv * dv + dw * dw) + F32(1e-3)
        # Peak slope of the shift is about 0.86 * push / reach < 1: the map never folds.
        shift = F32(lesion.push) * np.exp(-(d * F32(1 / reach)) ** 2) / d
        u, v, w = u.copy(), v.copy(), w.copy()
        u[near] -= du * shift
        v[near] -= dv * shift
        w[near] -= dw * shift
    return u, v, w


def brain_tissue(s: Series, u, v, w, brain_depth, pw: float):
    """Parenchyma value, parenchyma membership and white-matter share inside the cranial cavity."""
    h, t = s.head, s.tissue
    n = u.size
    # Sulci: zero-crossings of a few plane waves form a maze of clefts that only reach a few
    # centimetres into the brain. The grey matter lines them.
    gyri = 0.0
    for kx, ky, kz, ph in h.sulcus_waves:
        gyri = gyri + np.cos(kx * u + ky * v + kz * w + ph)
    gyri = np.abs(gyri) * F32(1.0 / len(h.sulcus_waves))
    shallow = soft(h.sulcus_depth - brain_depth, 3.0)
    sulcus = soft(h.sulcus_width - gyri, 0.02) * shallow
    m_brain = soft(brain_depth, pw) * (1 - sulcus)
    grey = np.maximum(soft(h.cortex - brain_depth, pw),
                      soft(h.sulcus_width + 0.06 - gyri, 0.03) * soft(h.sulcus_depth + 2 - brain_depth, 2.0))

    # Interhemispheric fissure with the falx down its middle; the corpus callosum closes it
    # between the horns of the lateral ventricles.
    mid = u - h.midline_bend * np.cos(v * F32(1 / 60))
    amid = np.abs(mid)
    cc_top = np.where(np.abs(v + 3) < 36, 22 - 9 * ((v + 3) * F32(1 / 36)) ** 2, F32(-200))
    in_fissure = soft(h.fissure / 2 - amid, pw) * soft(w - cc_top, 2.0)
    m_brain *= 1 - in_fissure

    near = np.flatnonzero((amid < 48) & (v > -50) & (v < 50) & (w > -45 + h.floor_shift) & (w < 42))
    vent = soft(-on(near, lambda a, b, c: ventricles(h, a, b, c), 99.0, n, u, v, w), pw)
    m_brain *= 1 - vent
    # Deep grey nuclei: lentiform, thalami, caudate heads.
    core = np.flatnonzero((amid < 32) & (np.abs(v) < 30) & (w > -12) & (w < 22))

    def nuclei(a, b, c):
        return np.maximum.reduce([
            soft(-ellipsoid_sd(a, b, c, (20, -3, 1), (6, 14, 9)), pw),
            soft(-ellipsoid_sd(a, b, c, (9 + 0.5 * h.vent_scale, 12, 4), (7, 10, 7)), pw),
            soft(-ellipsoid_sd(a, b, c, (6.5 + 1.5 * h.vent_scale + 3, -16, 11), (4, 8, 7)), pw),
        ])
    deep = on(core, nuclei, 0.0, n, amid, v, w)
    grey = np.maximum(grey, deep)
    # Cerebellum below the tentorium: dense folia, mostly grey.
    back = np.flatnonzero((v > -4) & (w < -5 + h.floor_shift))
    membrane = np.zeros(n, dtype=F32)
    if back.size:
        ub, vb, wb = u[back], v[back], w[back]
        tent = -14 - 0.4 * np.maximum(vb - 10, 0) - 0.004 * ub * ub + h.floor_shift
        cereb = soft(tent - wb, 1.5) * soft(vb + 4 - 0.45 * np.abs(ub), 3.0)
        folia = np.cos(1.4 * np.sqrt((vb + 30) ** 2 + (wb + 25) ** 2 + 0.3 * ub * ub) + 5 * gyri[back])
        grey[back] = lerp(grey[back], 0.5 + 0.1 * folia, cereb)
        # The tentorium shows as a faint line over the cerebellum; the ambient cistern is CSF
        # along its free edge in front.
        edge = vb + 4 - 0.45 * np.abs(ub)
        membrane[back] = soft(0.6 - np.abs(wb - tent), pw) * soft(edge, 3.0)
        cistern = soft(1.2 - np.abs(edge), pw) * soft(tent - wb, 1.5)
        m_brain[back] *= 1 - cistern
    tex = t["texture"] * np.cos(0.31 * u - 0.22 * v + 0.4 * w) * np.cos(0.27 * v + 0.19 * w + 0.5)
    value = lerp(t["wm"] + tex, t["gm"], grey)
    value = lerp(value, t["deep"], deep * (1 - grey + deep) * 0.5)
    value = lerp(value, t["csf"], 1 - m_brain)
    falx = soft(max(0.5, pw * 0.5) - amid, pw) * soft(w - cc_top - 6, 2.0)
    value = lerp(value, t["calc"] if h.falx_calc else t["falx"], np.maximum(falx, membrane) * F32(0.8))
    if h.choroid_calc or h.pineal_calc:
        def calcs(a, b, c, d):
            out = np.zeros(a.size, dtype=F32)
            if h.choroid_calc:
                atrium_u = 3.0 + 1.5 * h.vent_scale + 11
                out = np.maximum(out, soft(-ellipsoid_sd(d, b, c, (atrium_u, 19, 12), (2.5, 3.5, 2.5)), pw))
            if h.pineal_calc:
                out = np.maximum(out, soft(-ellipsoid_sd(a, b, c, (0, 17, 2), (2, 2, 2)), pw))
            return out
        calc = on(near, calcs, 0.0, n, u, v, w, amid)
        value = lerp(value, t["calc"], calc)
    # Everything returned here replaces CSF, so the membership is 1 and the value carries the
    # sulci, fissure and ventricles; parenchyma proper is m_brain.
    parenchyma = m_brain
    return value, parenchyma, np.clip(1 - grey, 0, 1)


def skull_base(s: Series, u, v, w, floor, trab, pw: float):
    h, t = s.head, s.tissue
    au = np.abs(u)
    bone = np.maximum.reduce([
        soft(floor - w, pw) * soft(w - floor + 6, pw),
        soft(7 - np.abs(v + 6 - 0.45 * au), pw) * soft(au - 12, pw),
        soft(6 - au, pw) * soft(6 - np.abs(v + 8), pw),
    ])
    base = lerp(np.full(u.size, t["muscle"], dtype=F32), t["base_bone"] * (0.6 + 0.4 * trab), bone)
    air = np.maximum.reduce([
        soft(-ellipsoid_sd(u, v, w, (0, -17, -41 + h.floor_shift), (13, 10, 9)), pw),
        soft(-ellipsoid_sd(au, v, w, (7, -h.front + 36, -38 + h.floor_shift), (8, 14, 12)), pw)
        * soft(np.cos(1.1 * u) * np.cos(0.9 * v) * np.cos(0.8 * w) + 0.2, 0.3),
        soft(-ellipsoid_sd(au, v, w, (h.half_width - 20, 14, -55 + h.floor_shift), (9, 9, 8)), pw)
        * soft(np.cos(1.4 * u + 0.5) * np.cos(1.2 * v) + 0.3, 0.3),
        soft(-ellipsoid_sd(u, v, w, (0, -h.front + 30, -62 + h.floor_shift), (9, 22, 14)), pw),
    ])
    return lerp(base, t["sinus"], air)


def orbits(s: Series, u, v, w, depth, val, pw: float):
    h, t = s.head, s.tissue
    au = np.abs(u)
    orbit_w = -36 + h.floor_shift
    cone = soft(-ellipsoid_sd(au, v, w, (26, -h.front + 38, orbit_w), (13, 18, 11)), pw) * soft(depth - 2, pw)
    val = lerp(val, t["fat"], cone)
    val = lerp(val, t["muscle"], cone * soft(3.5 - np.abs(au - 35), pw))
    globe = soft(-ellipsoid_sd(au, v, w, (31, -h.front + 21, orbit_w), (11.5, 11.5, 11.5)), pw)
    val = lerp(val, t["globe"], globe)
    lens = soft(-ellipsoid_sd(au, v, w, (31, -h.front + 11.5, orbit_w), (4.5, 2, 4.5)), pw)
    return lerp(val, t["lens"], lens)


# ----------------------------------------------------------------------------- lesions

def place_lesion(rng: np.random.Generator, s: Series, kind: str) -> Lesion | None:
    """Draw a lesion anywhere in the brain that lies inside the scanned slab."""
    h = s.head
    z_lo, z_hi = s.z_first, s.z_first + (s.slices - 1) * s.thickness
    if kind == "tumor":
        radius = rng.uniform(5, 21)
    elif kind == "hemorrhage":
        radius = rng.uniform(4, 16)
    else:
        radius = rng.uniform(5, 30)
    for attempt in range(120):
        r = radius * (1 - 0.3 * attempt / 120)
        if rng.random() < 0.3:
            # next to the lateral ventricles, which the model must tell apart from a lesion
            side = rng.choice([-1.0, 1.0])
            c = np.array([side * rng.uniform(6, 26), rng.uniform(-32, 28), rng.uniform(0, 26)])
            c = c + rng.standard_normal(3) * (r * 0.5)
        else:
            c = np.array([rng.uniform(-70, 70), rng.uniform(-95, 100), rng.uniform(-70, 90)])
        z = float((s.rot @ c)[2] + s.origin[2])
        margin = min(r * 0.4, 6)
        if not (z_lo + margin <= z <= z_hi - margin):
            continue
        probe = c + unit_sphere(rng, 24) * (r * 0.7)
        pts = np.vstack([c[None], probe]).astype(F32)
        a = anatomy(s, pts[:, 0], pts[:, 1], pts[:, 2], 0.5)
        if a.parenchyma[0] < 0.9 or a.intracranial[1:].mean() < 0.85:
            continue
        if any(np.linalg.norm(c - o.centre) < r + o.radius + 4 for o in s.lesions):
            continue
        lesion = build_lesion(rng, s, kind, c, r)
        # A wedge moves its centre off the drawn point: check spacing again.
        if lesion is not None and not any(
                np.linalg.norm(lesion.centre - o.centre) < lesion.radius + o.radius + 4 for o in s.lesions):
            return lesion
    return None


def unit_sphere(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build_lesion(rng: np.random.Generator, s: Series, kind: str, c: np.ndarray, r: float) -> Lesion | None:
    ct = s.modality == "CT"
    n_lobes = int(rng.integers(3, 7))
    irregular = {"tumor": 0.15, "hemorrhage": 0.24, "infarct": 0.15}[kind]
    lobes = np.concatenate([unit_sphere(rng, n_lobes), rng.uniform(0.6, 2.1, (n_lobes, 1)),
                            rng.uniform(0.2, 1.0, (n_lobes, 1)) * irregular / math.sqrt(n_lobes) * 2], 1)
    phases = rng.uniform(0, 2 * np.pi, n_lobes)
    stretch = rng.uniform(0.72, 1.3, 3)
    stretch /= np.prod(stretch) ** (1 / 3)
    lesion = Lesion(kind=kind, centre=c, radius=r, bound=0.0, rot=random_rotation(rng), stretch=stretch,
                    lobes=lobes, phases=phases, variant="")
    if kind == "tumor":
        lesion.variant = "ring" if rng.random() < 0.5 and r > 7 else "solid"
        lesion.wall = rng.uniform(1.8, min(5.0, r * 0.45))
        lesion.oedema = rng.uniform(0, 0.8) * r + rng.uniform(0, 8)
        if rng.random() < 0.3:
            k = int(rng.integers(1, 5))
            lesion.calcs = np.concatenate([unit_sphere(rng, k) * rng.uniform(0, 0.7 * r, (k, 1)), rng.uniform(0.8, 2.2, (k, 1))], 1)
        lesion.values = ({"solid": rng.uniform(30, 52), "wall": rng.uniform(55, 95), "core": rng.uniform(6, 22),
                          "calc": rng.uniform(180, 600), "oedema": rng.uniform(13, 22), "mottle": rng.uniform(2, 6)}
                         if ct else
                         {"solid": rng.uniform(1.3, 1.95), "wall": rng.uniform(1.5, 2.2), "core": rng.uniform(0.35, 1.9),
                          "calc": rng.uniform(0.1, 0.4), "oedema": rng.uniform(1.6, 2.3), "mottle": rng.uniform(0.05, 0.2)})
    elif kind == "hemorrhage":
        lesion.variant = "rimmed" if rng.random() < 0.6 else "plain"
        lesion.wall = rng.uniform(0.8, 2.5)
        lesion.oedema = rng.uniform(1.0, 4.0) + rng.uniform(0, 0.2) * r
        lesion.values = ({"clot": rng.uniform(55, 90), "rim": 0.0, "oedema": rng.uniform(16, 24), "mottle": rng.uniform(2, 7)}
                         if ct else
                         {"clot": rng.uniform(1.3, 2.3), "rim": rng.uniform(0.12, 0.45), "oedema": rng.uniform(1.5, 2.2),
                          "mottle": rng.uniform(0.2, 0.6)})
        if ct:
            lesion.values["rim"] = lesion.values["clot"]
    else:
        lesion.values = ({"core": rng.uniform(10, 25), "mottle": rng.uniform(1, 3)} if ct else
                         {"core": rng.uniform(1.5, 2.2), "mottle": rng.uniform(0.05, 0.2)})
        if rng.random() < 0.65 and not ventricular_point(s, c):
            # Territorial: a cone from a deep apex out through the cortex. Its axis runs roughly
            # away from the brain centre, as arterial territories do.
            out = c - np.array([0.0, 0.0, 10.0])
            out[2] *= 0.4
            out = out / max(np.linalg.norm(out), 1e-6)
            surface = march_to_surface(s, c, out)
            if surface is None:
                return None
            depth = rng.uniform(16, 50)
            lesion.variant = "wedge"
            lesion.axis = out
            lesion.apex = surface - out * depth
            lesion.length = depth + 12
            # Base at most 60 mm across (brief: infarcts 10-60 mm).
            widest = math.atan(30 / depth)
            lesion.half_angles = (min(math.radians(rng.uniform(14, 36)), widest),
                                  min(math.radians(rng.uniform(10, 30)), widest))
            lesion.centre = lesion.apex + out * depth * 0.6
            lesion.radius = depth * math.tan(max(lesion.half_angles))
        else:
            lesion.variant = "deep"
            lesion.radius = min(r, rng.uniform(5, 14))
    if kind in ("tumor", "hemorrhage") and lesion.radius >= 8:
        lesion.push = rng.uniform(0.2, 0.45) * (lesion.radius + 0.3 * lesion.oedema)
    if kind != "tumor":
        # Arterial territories and parenchymal bleeds stop at the falx; a tumour may cross it.
        mid = lesion.centre[0] - s.head.midline_bend * math.cos(lesion.centre[1] / 60)
        lesion.hemisphere = 1.0 if mid >= 0 else -1.0
        lesion.midline_bend = s.head.midline_bend
    lesion.bound = lesion_bound(lesion)
    return lesion


def lesion_bound(lesion: Lesion) -> float:
    """Radius of a sphere about the centre that holds the lesion and its oedema (crop size)."""
    if lesion.kind == "infarct" and lesion.variant == "wedge":
        depth = np.linalg.norm(lesion.centre - lesion.apex) / 0.6
        far = math.hypot(lesion.length - 0.6 * depth, lesion.length * math.tan(max(lesion.half_angles)) * 1.15)
        return max(0.6 * depth, far) + 3
    # Shapes live in the stretched lesion frame: a distance there is up to stretch.max() mm.
    outline = lesion.radius * (1 + float(np.abs(lesion.lobes[:, 4]).sum()))
    return (outline + 1.7 * lesion.oedema + 3) * float(lesion.stretch.max()) + 3


def ventricular_point(s: Series, c: np.ndarray) -> bool:
    return bool(ventricles(s.head, c[0:1], c[1:2], c[2:3])[0] < 3)


def march_to_surface(s: Series, c: np.ndarray, direction: np.ndarray) -> np.ndarray | None:
    steps = np.arange(0, 120, 1.0)
    pts = c[None] + steps[:, None] * direction[None]
    a = anatomy(s, pts[:, 0].astype(F32), pts[:, 1].astype(F32), pts[:, 2].astype(F32), 0.5)
    outside = np.nonzero(a.intracranial < 0.5)[0]
    if outside.size == 0:
        return None
    return pts[max(outside[0] - 2, 0)]


def shape_radius(lesion: Lesion, dx: np.ndarray, dy: np.ndarray, dz: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """Lobulated outline: nominal radius modulated by cosines of the direction."""
    inv = 1.0 / np.maximum(norm, 1e-6)
    scale = 1.0
    for (ax, ay, az, freq, amp), ph in zip(lesion.lobes, lesion.phases):
        scale = scale + amp * np.cos(freq * (ax * dx + ay * dy + az * dz) * inv * np.pi + ph)
    return lesion.radius * scale


def lesion_sample(lesion: Lesion, p: np.ndarray, pw: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At head-frame points p (3, n): own-tissue membership, tissue value, oedema membership."""
    own, value, oedema = lesion_tissue(lesion, p, pw)
    if lesion.hemisphere:
        side = soft(lesion.hemisphere * (p[0] - lesion.midline_bend * np.cos(p[1] * F32(1 / 60))) - 1.0, pw)
        own = own * side
        oedema = oedema * side
    return own, value, oedema


def lesion_tissue(lesion: Lesion, p: np.ndarray, pw: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    vals = lesion.values
    d = p - lesion.centre[:, None].astype(F32)
    local = lesion.rot.T.astype(F32) @ d / lesion.stretch[:, None].astype(F32)
    dx, dy, dz = local
    norm = np.sqrt(dx * dx + dy * dy + dz * dz)
    # Internal heterogeneity: plane waves along the lobe directions, irregular rather than striped.
    mottle = 0.0
    for (ax, ay, az, freq, _), ph in zip(lesion.lobes, lesion.phases):
        mottle = mottle + np.cos((ax * dx + ay * dy + az * dz) * F32(0.35 + 0.3 * freq) + ph)
    mottle = mottle * F32(1.4 / len(lesion.phases))
    if lesion.kind == "infarct" and lesion.variant == "wedge":
        rel = p - lesion.apex[:, None].astype(F32)
        axis = lesion.axis.astype(F32)
        along = axis @ rel
        perp = rel - axis[:, None] * along[None]
        e1 = np.cross(lesion.axis, [0.0, 0.0, 1.0])
        if np.linalg.norm(e1) < 1e-3:
            e1 = np.array([1.0, 0.0, 0.0])
        e1 = (e1 / np.linalg.norm(e1)).astype(F32)
        e2 = np.cross(lesion.axis, e1).astype(F32)
        a = np.maximum(along, 1e-3)
        q = np.sqrt(((e1 @ perp) / (a * math.tan(lesion.half_angles[0]))) ** 2
                    + ((e2 @ perp) / (a * math.tan(lesion.half_angles[1]))) ** 2)
        wobble = 1 + 0.12 * np.cos(3 * np.arctan2(e2 @ perp, e1 @ perp) + lesion.phases[0])
        sd = np.maximum((q / wobble - 1) * a * math.tan(min(lesion.half_angles)), np.maximum(-along, along - lesion.length))
        own = soft(-sd, pw)
        return own, vals["core"] + vals["mottle"] * mottle, np.zeros_like(own)
    outline = shape_radius(lesion, dx, dy, dz, norm)
    sd = norm - outline
    own = soft(-sd, pw)
    if lesion.kind == "tumor":
        value = np.full(norm.shape, vals["solid"]) + vals["mottle"] * mottle
        if lesion.variant == "ring":
            wall = lesion.wall * (1 + 0.35 * np.cos(2.3 * dx / np.maximum(norm, F32(1e-3)) + lesion.phases[0]))
            core = soft(-(sd + wall), pw)
            value = lerp(np.full(norm.shape, vals["wall"]), vals["core"] + vals["mottle"] * mottle, core)
        for cx, cy, cz, cr in lesion.calcs:
            calc = soft(cr - np.sqrt((dx - cx) ** 2 + (dy - cy) ** 2 + (dz - cz) ** 2), pw)
            value = lerp(value, vals["calc"], calc)
        ring = lesion.oedema * (1 + 0.3 * np.cos(2.7 * dy / np.maximum(norm, F32(1e-3)) + lesion.phases[-1]) + 0.25 * mottle)
        oedema = soft(-(sd - ring), max(pw, 3.0))
        return own, value, oedema
    if lesion.kind == "hemorrhage":
        value = vals["clot"] + vals["mottle"] * mottle * (1 if lesion.variant == "plain" else 0.5)
        if lesion.variant == "rimmed":
            value = lerp(value, vals["rim"], soft(sd + lesion.wall, pw))
        oedema = soft(-(sd - lesion.oedema), max(pw, 1.0))
        return own, value, oedema
    # deep infarct: a compact ovoid
    return own, vals["core"] + vals["mottle"] * mottle, np.zeros_like(own)


# ----------------------------------------------------------------------------- rendering

@dataclass
class Rendered:
    pixels: list[np.ndarray]
    boxes: list[list[tuple[int, dict[str, int], float]]]  # per lesion: (slice, box, area mm2)
    head_masks: list[np.ndarray]


def slice_coords(s: Series, k: int, rows: np.ndarray, cols: np.ndarray, dz: float = 0.0) -> tuple[np.ndarray, ...]:
    """Head-frame coordinates of pixel centres (rows x cols grid) on slice k, offset dz in z."""
    half = (s.rows - 1) / 2 * s.spacing
    x = cols * s.spacing - half - s.origin[0]
    y = rows * s.spacing - half - s.origin[1]
    z = s.z_first + k * s.thickness + dz - s.origin[2]
    rt = s.rot.T
    out = []
    for a in range(3):
        out.append((rt[a, 1] * y)[:, None].astype(F32) + (rt[a, 0] * x + rt[a, 2] * z)[None, :].astype(F32))
    return tuple(out)


def slice_anatomy(s: Series, k: int, idx: np.ndarray, pw: float) -> Anatomy:
    """Anatomy of slice k, computed only inside the head's bounding box (found on a coarse grid)."""
    n = s.rows
    step = 8
    coarse = idx[::step]
    u, v, w = slice_coords(s, k, coarse, coarse)
    depth, _ = head_depth(s.head, u, v, w)
    inside = depth > -(step * s.spacing * 1.5 + 2)
    full = Anatomy(value=np.full((n, n), s.tissue["air"], dtype=F32), intracranial=np.zeros((n, n), F32),
                   parenchyma=np.zeros((n, n), F32), white=np.zeros((n, n), F32), head=np.zeros((n, n), F32))
    if not inside.any():
        return full
    rr = np.flatnonzero(inside.any(axis=1))
    cc = np.flatnonzero(inside.any(axis=0))
    ra, rb = max(rr[0] * step - step, 0), min(rr[-1] * step + 2 * step, n)
    ca, cb = max(cc[0] * step - step, 0), min(cc[-1] * step + 2 * step, n)
    u, v, w = slice_coords(s, k, idx[ra:rb], idx[ca:cb])
    a = anatomy(s, u, v, w, pw)
    for name in ("value", "intracranial", "parenchyma", "white", "head"):
        getattr(full, name)[ra:rb, ca:cb] = getattr(a, name)
    return full


def render(s: Series) -> Rendered:
    n = s.rows
    idx = np.arange(n, dtype=np.float64)
    pw = s.spacing
    rng = np.random.Generator(np.random.PCG64([s.seed, 7]))
    pixels: list[np.ndarray] = []
    head_masks: list[np.ndarray] = []
    boxes: list[list[tuple[int, dict[str, int], float]]] = [[] for _ in s.lesions]
    lesion_px = []
    for lesion in s.lesions:
        pc = s.rot @ lesion.centre + s.origin
        half = (s.rows - 1) / 2 * s.spacing
        lesion_px.append(((pc[1] + half) / s.spacing, (pc[0] + half) / s.spacing, pc[2], lesion.bound))
    bias = mr_bias(s, idx) if s.modality == "MR" else None
    for k in range(s.slices):
        a = slice_anatomy(s, k, idx, pw)
        val = a.value
        zk = s.z_first + k * s.thickness
        for li, lesion in enumerate(s.lesions):
            r0, c0, zc, bound = lesion_px[li]
            gap = max(abs(zk - zc) - s.thickness / 2, 0.0)
            if gap >= bound:
                continue
            half_px = int(math.ceil(math.sqrt(bound * bound - gap * gap) / s.spacing)) + 2
            ra, rb = max(int(r0) - half_px, 0), min(int(r0) + half_px + 1, n)
            ca, cb = max(int(c0) - half_px, 0), min(int(c0) + half_px + 1, n)
            if ra >= rb or ca >= cb:
                continue
            own, value, oedema = lesion_patch(s, lesion, k, ra, rb, ca, cb)
            clip = a.parenchyma[ra:rb, ca:cb] if lesion.kind == "infarct" else a.intracranial[ra:rb, ca:cb]
            own = own * np.clip(clip * 1.25, 0, 1)
            patch = val[ra:rb, ca:cb]
            if oedema is not None:
                ed = oedema * (0.25 + 0.75 * a.white[ra:rb, ca:cb]) * a.parenchyma[ra:rb, ca:cb]
                if lesion.kind == "hemorrhage":
                    ed = oedema * a.parenchyma[ra:rb, ca:cb]
                patch = lerp(patch, lesion.values["oedema"], ed)
            patch = lerp(patch, value, own)
            val[ra:rb, ca:cb] = patch
            solid = own >= 0.5
            area = float(solid.sum()) * s.spacing ** 2
            if area > 0 and 2 * math.sqrt(area / math.pi) >= MIN_EQUIVALENT_DIAMETER_MM:
                rr = np.nonzero(solid.any(axis=1))[0]
                cc = np.nonzero(solid.any(axis=0))[0]
                box = {"x": int(ca + cc[0]), "y": int(ra + rr[0]), "width": int(cc[-1] - cc[0] + 1),
                       "height": int(rr[-1] - rr[0] + 1)}
                boxes[li].append((k, box, area))
        if s.modality == "CT":
            img = val + ct_noise(rng, s, n)
        else:
            img = mr_signal(rng, s, val, bias)
        pixels.append(img)
        head_masks.append(a.head > 0.5)
    return Rendered(pixels=pixels, boxes=boxes, head_masks=head_masks)


def lesion_patch(s: Series, lesion: Lesion, k: int, ra: int, rb: int, ca: int, cb: int):
    """Lesion rendered at sub-voxel resolution: three depths through the slab (thick slices cut
    lesions partially), partial-volume edges in plane."""
    rows = np.arange(ra, rb, dtype=np.float64)
    cols = np.arange(ca, cb, dtype=np.float64)
    own_sum = value_sum = oed_sum = None
    for dz in (-s.thickness / 3, 0.0, s.thickness / 3):
        u, v, w = slice_coords(s, k, rows, cols, dz)
        shape = u.shape
        own, value, oed = lesion_sample(lesion, np.stack([u.ravel(), v.ravel(), w.ravel()]), s.spacing)
        own, value, oed = own.reshape(shape), value.reshape(shape), oed.reshape(shape)
        if own_sum is None:
            own_sum, value_sum, oed_sum = own, own * value, oed
        else:
            own_sum = own_sum + own
            value_sum = value_sum + own * value
            oed_sum = oed_sum + oed
    value_mean = value_sum / np.maximum(own_sum, F32(1e-6))
    has_oedema = lesion.kind != "infarct" and lesion.oedema > 0
    return own_sum * F32(1 / 3), value_mean, oed_sum * F32(1 / 3) if has_oedema else None


def white_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    # Uniform bytes are several times cheaper than normals; the smoothing below (and the sum of
    # two draws for MR) makes the result close to Gaussian by the central limit theorem.
    b = np.frombuffer(rng.bytes(n * n), dtype=np.uint8).reshape(n, n)
    return (b.astype(F32) - 127.5) * (1 / 73.9)


def ct_noise(rng: np.random.Generator, s: Series, n: int) -> np.ndarray:
    """Spatially correlated noise: white noise through a small separable low-pass, rescaled."""
    x = (white_noise(rng, n) + white_noise(rng, n)) * F32(math.sqrt(0.5))
    c = s.noise_kernel
    kern = np.array([1.0, c * 2 + 1, 1.0])
    kern = kern / kern.sum()
    y = kern[1] * x
    y[1:] += kern[0] * x[:-1]
    y[:-1] += kern[2] * x[1:]
    z = kern[1] * y
    z[:, 1:] += kern[0] * y[:, :-1]
    z[:, :-1] += kern[2] * y[:, 1:]
    gain = 1 / float(np.sum(kern ** 2))  # variance of the 2D separable filter is (sum k^2)^2
    return z * (s.noise * gain)


def mr_bias(s: Series, idx: np.ndarray) -> np.ndarray:
    t = (idx / (s.rows - 1) * 2 - 1).astype(F32)
    b = s.bias
    gain = 1 + b[0] * t[None, :] + b[1] * t[:, None] + b[2] * t[:, None] * t[None, :] \
        + b[3] * (t[None, :] ** 2 - 0.33) + b[4] * (t[:, None] ** 2 - 0.33)
    return np.clip(gain, 0.5, 1.6).astype(F32)


def mr_signal(rng: np.random.Generator, s: Series, val: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Magnitude of a complex signal with Gaussian noise in both channels: Rician."""
    n = s.rows
    # Each channel is the sum of three unit uniforms (Irwin-Hall, kurtosis -0.4: close to
    # Gaussian) at a fraction of the cost of normal draws.
    sigma = s.noise / math.sqrt(3)
    re = val * bias + (white_noise(rng, n) + white_noise(rng, n) + white_noise(rng, n)) * sigma
    im = (white_noise(rng, n) + white_noise(rng, n) + white_noise(rng, n)) * sigma
    return np.sqrt(re * re + im * im) * s.mr_scale


# ----------------------------------------------------------------------------- DICOM

def stored_pixels(s: Series, img: np.ndarray) -> np.ndarray:
    if s.modality == "CT":
        raw = np.rint(img - s.ct_intercept)
        if s.ct_signed:
            return np.clip(raw, -32768, 32767).astype("<i2")
        return np.clip(raw, 0, 2 ** s.bits_stored - 1).astype("<u2")
    return np.clip(np.rint(img), 0, 2 ** s.bits_stored - 1).astype("<u2")


def base_dataset(s: Series) -> Dataset:
    ds = Dataset()
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
    ds.SOPClassUID = CT_IMAGE_STORAGE if s.modality == "CT" else MR_IMAGE_STORAGE
    ds.StudyDate = s.study_date
    ds.SeriesDate = s.study_date
    ds.ContentDate = s.study_date
    ds.StudyTime = s.study_time
    ds.SeriesTime = s.study_time
    ds.ContentTime = s.study_time
    ds.AccessionNumber = ""
    ds.Modality = s.modality
    ds.Manufacturer = "mia held-out phantom"
    ds.ManufacturerModelName = "generate.py"
    ds.ReferringPhysicianName = ""
    ds.StudyDescription = "HELDOUT PHANTOM HEAD - NOT FOR CLINICAL USE"
    ds.SeriesDescription = f"HELDOUT {s.modality} HEAD AXIAL"
    ds.PatientName = f"Heldout^Phantom{s.seed}"
    ds.PatientID = f"HELDOUT-{s.seed}"
    ds.PatientBirthDate = ""
    ds.PatientSex = "O"
    ds.BodyPartExamined = "HEAD"
    ds.SliceThickness = f"{s.thickness:g}"
    ds.SpacingBetweenSlices = f"{s.thickness:g}"
    if s.modality == "CT":
        ds.KVP = "120"
        ds.ConvolutionKernel = "H30s" if s.noise_kernel > 0.6 else "H40s"
    else:
        ds.ScanningSequence = ["SE", "IR"]
        ds.SequenceVariant = ["SK", "SP"]
        ds.ScanOptions = ""
        ds.MRAcquisitionType = "2D"
        ds.RepetitionTime = "9000"
        ds.EchoTime = "120"
        ds.InversionTime = "2500"
        ds.EchoTrainLength = "16"
        ds.ImagedNucleus = "1H"
        ds.MagneticFieldStrength = f"{s.field_strength:g}"
    ds.PatientPosition = "HFS"
    ds.StudyInstanceUID = uid_for(s.seed, "study")
    ds.SeriesInstanceUID = uid_for(s.seed, "series")
    ds.StudyID = str(s.seed % 100000)
    ds.SeriesNumber = "1" if s.modality == "CT" else "2"
    ds.AcquisitionNumber = "1"
    ds.ImageOrientationPatient = ["1", "0", "0", "0", "1", "0"]
    ds.FrameOfReferenceUID = uid_for(s.seed, "frame-of-reference")
    ds.PositionReferenceIndicator = ""
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows = s.rows
    ds.Columns = s.rows
    ds.PixelSpacing = [f"{s.spacing:g}", f"{s.spacing:g}"]
    ds.BitsAllocated = 16
    ds.BitsStored = s.bits_stored
    ds.HighBit = s.bits_stored - 1
    ds.PixelRepresentation = 1 if s.ct_signed else 0
    ds.WindowCenter = f"{s.window[0]:g}"
    ds.WindowWidth = f"{s.window[1]:g}"
    if s.modality == "CT":
        ds.RescaleIntercept = str(s.ct_intercept)
        ds.RescaleSlope = "1"
        ds.RescaleType = "HU"
    return ds


def write_series(s: Series, out_dir: str, stored: list[np.ndarray]) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    ds = base_dataset(s)
    half = (s.rows - 1) / 2 * s.spacing
    uids = []
    for k, pix in enumerate(stored):
        sop = uid_for(s.seed, f"sop:{k}")
        uids.append(sop)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = ds.SOPClassUID
        meta.MediaStorageSOPInstanceUID = sop
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        meta.ImplementationClassUID = IMPLEMENTATION_UID
        meta.ImplementationVersionName = "MIA_HELDOUT_1"
        fds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
        fds.update(ds)
        fds.SOPInstanceUID = sop
        fds.InstanceNumber = str(k + 1)
        z = s.z_first + k * s.thickness
        fds.ImagePositionPatient = [f"{-half:.4f}", f"{-half:.4f}", f"{z:.4f}"]
        fds.SliceLocation = f"{z:.4f}"
        fds.PixelData = pix.tobytes()
        fds["PixelData"].VR = "OW"
        fds.is_little_endian = True
        fds.is_implicit_VR = False
        fds.save_as(os.path.join(out_dir, f"IM{k + 1:04d}.dcm"), write_like_original=False)
    return uids


def mr_window(s: Series, r: "Rendered") -> tuple[float, float]:
    """Window over the head's signal, as a scanner would store it (lower 2nd to 99.5th percentile)."""
    sample = np.concatenate([img[::3, ::3][m[::3, ::3]] for img, m in zip(r.pixels, r.head_masks)])
    if sample.size == 0:
        return float(s.mr_scale), float(2 * s.mr_scale)
    lo, hi = np.percentile(sample, [2, 99.5])
    return float(round((lo + hi) / 2)), float(max(round(hi - lo), 2))


# ----------------------------------------------------------------------------- one series

def generate_series(seed: int, modality: str, kinds: list[str], out_root: str) -> tuple[dict, Series, Rendered]:
    s = draw_series(seed, modality, kinds)
    r = render(s)
    if s.modality == "MR":
        s.window = mr_window(s, r)
    stored = [stored_pixels(s, img) for img in r.pixels]
    directory = os.path.join(out_root, f"series-{seed}-{modality}")
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    uids = write_series(s, directory, stored)
    lesions = []
    for lesion, found in zip(s.lesions, r.boxes):
        if not found:
            continue
        key = max(found, key=lambda f: f[2])
        lesions.append({
            "label": LABELS[lesion.kind], "kind": lesion.kind, "instance_uid": uids[key[0]], "frame": 0,
            "slice_index": key[0], "box": key[1],
            "slices": [{"slice_index": k, "instance_uid": uids[k], "frame": 0, "box": box} for k, box, _ in found],
        })
    entry = {
        "seed": seed, "modality": modality, "scan_uid": uid_for(seed, "series"), "study_uid": uid_for(seed, "study"),
        "patient_id": f"HELDOUT-{seed}", "rows": s.rows, "columns": s.rows, "slices": s.slices,
        "pixel_spacing_mm": s.spacing, "instance_uids": uids, "lesions": lesions,
    }
    return entry, s, r


# ----------------------------------------------------------------------------- previews

def png_bytes(rgb: np.ndarray) -> bytes:
    h, w, _ = rgb.shape
    raw = b"".join(b"\0" + rgb[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


BOX_COLOURS = {"tumor": (255, 200, 0), "hemorrhage": (255, 40, 40), "infarct": (40, 200, 255)}


def write_preview(entry: dict, s: Series, r: Rendered, directory: str, tile: int = 256) -> None:
    os.makedirs(directory, exist_ok=True)
    if s.modality == "CT":
        lo, hi = s.window[0] - s.window[1] / 2, s.window[0] + s.window[1] / 2
    else:
        lo, hi = s.window[0] - s.window[1] / 2, s.window[0] + s.window[1] / 2
    cols = 6
    n = len(r.pixels)
    grid_rows = (n + cols - 1) // cols
    sheet = np.zeros((grid_rows * tile, cols * tile, 3), dtype=np.uint8)
    step = s.rows / tile
    pick = (np.arange(tile) * step).astype(int)
    for k, img in enumerate(r.pixels):
        g = np.clip((img[np.ix_(pick, pick)] - lo) / (hi - lo) * 255, 0, 255).astype(np.uint8)
        t = np.repeat(g[:, :, None], 3, axis=2)
        for lesion in entry["lesions"]:
            for sl in lesion["slices"]:
                if sl["slice_index"] != k:
                    continue
                b = sl["box"]
                x0, y0 = int(b["x"] / step), int(b["y"] / step)
                x1, y1 = int((b["x"] + b["width"] - 1) / step), int((b["y"] + b["height"] - 1) / step)
                colour = BOX_COLOURS[lesion["kind"]]
                if sl["slice_index"] == lesion["slice_index"]:
                    colour = tuple(min(255, c + 60) for c in colour)
                t[y0, x0:x1 + 1] = colour
                t[y1, x0:x1 + 1] = colour
                t[y0:y1 + 1, x0] = colour
                t[y0:y1 + 1, x1] = colour
        gy, gx = divmod(k, cols)
        sheet[gy * tile:(gy + 1) * tile, gx * tile:(gx + 1) * tile] = t
    with open(os.path.join(directory, f"series-{s.seed}-{s.modality}.png"), "wb") as f:
        f.write(png_bytes(sheet))


# ----------------------------------------------------------------------------- checks

def self_check(seeds: list[int], kinds: list[str]) -> int:
    """Determinism, truth consistency and DICOM conformance on a few series."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, seed in enumerate(seeds):
            modality = "CT" if i % 2 == 0 else "MR"
            a_dir, b_dir = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            entry, s, r = generate_series(seed, modality, kinds, a_dir)
            generate_series(seed, modality, kinds, b_dir)
            name = f"series-{seed}-{modality}"
            for f in sorted(os.listdir(os.path.join(a_dir, name))):
                with open(os.path.join(a_dir, name, f), "rb") as fa, open(os.path.join(b_dir, name, f), "rb") as fb:
                    if fa.read() != fb.read():
                        failures.append(f"{name}/{f}: not deterministic")
            files = sorted(os.listdir(os.path.join(a_dir, name)))
            if any(m[0].any() or m[-1].any() or m[:, 0].any() or m[:, -1].any() for m in r.head_masks):
                failures.append(f"{name}: head touches the edge of the field of view")
            if len(files) != entry["slices"] or len(entry["instance_uids"]) != entry["slices"]:
                failures.append(f"{name}: slice count")
            zs = []
            for k, f in enumerate(files):
                ds = pydicom.dcmread(os.path.join(a_dir, name, f))
                zs.append(float(ds.ImagePositionPatient[2]))
                if ds.SOPInstanceUID != entry["instance_uids"][k] or ds.SeriesInstanceUID != entry["scan_uid"]:
                    failures.append(f"{name}/{f}: uid mismatch")
            if any(b <= a for a, b in zip(zs, zs[1:])):
                failures.append(f"{name}: z not increasing")
            for lesion in entry["lesions"]:
                for sl in lesion["slices"]:
                    b = sl["box"]
                    mask = r.head_masks[sl["slice_index"]]
                    inside = mask[b["y"]:b["y"] + b["height"], b["x"]:b["x"] + b["width"]]
                    if b["x"] < 0 or b["y"] < 0 or b["x"] + b["width"] > entry["columns"] or b["y"] + b["height"] > entry["rows"]:
                        failures.append(f"{name}: box outside image")
                    elif inside.mean() < 0.99:
                        failures.append(f"{name}: {lesion['kind']} box leaves the head on slice {sl['slice_index']}")
                key = [sl for sl in lesion["slices"] if sl["slice_index"] == lesion["slice_index"]]
                if len(key) != 1 or key[0]["instance_uid"] != lesion["instance_uid"] or key[0]["box"] != lesion["box"]:
                    failures.append(f"{name}: key slice inconsistent")
            if shutil.which("dciodvfy"):
                for f in (files[0], files[len(files) // 2]):
                    res = subprocess.run(["dciodvfy", os.path.join(a_dir, name, f)], capture_output=True, text=True)
                    errors = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("Error")]
                    if errors:
                        failures.append(f"{name}/{f}: dciodvfy: {errors[:3]}")
            print(f"check {name}: {entry['slices']} slices, {len(entry['lesions'])} lesions", file=sys.stderr)
    for f in failures:
        print("FAIL", f, file=sys.stderr)
    print("check: " + ("ok" if not failures else f"{len(failures)} failures"), file=sys.stderr)
    return 1 if failures else 0


# ----------------------------------------------------------------------------- CLI

def parse_kinds(text: str) -> list[str]:
    if text.strip() == "none":
        return []
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in LABELS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"kinds must be a subset of {','.join(LABELS)} or 'none'")
    return kinds


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Held-out head phantoms (NOT FOR CLINICAL USE).")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--series", type=int, default=1)
    ap.add_argument("--seed", type=int, default=60_000_000)
    ap.add_argument("--modality", choices=["CT", "MR", "both"], default="both")
    ap.add_argument("--truth", help="truth.json path (default OUT/truth.json)")
    ap.add_argument("--kinds", type=parse_kinds, default=list(LABELS))
    ap.add_argument("--preview", help="write a PNG contact sheet per series here")
    ap.add_argument("--check", action="store_true", help="self-check a few series and exit")
    args = ap.parse_args(argv)
    if args.check:
        return self_check([args.seed + i for i in range(max(args.series, 2))], args.kinds)
    if not args.out:
        ap.error("--out is required")
    if not 1 <= args.series <= 100_000 or args.seed < 0:
        ap.error("--series must be 1..100000 and --seed non-negative")
    os.makedirs(args.out, exist_ok=True)
    entries = []
    start = time.time()
    for i in range(args.series):
        seed = args.seed + i
        modality = args.modality if args.modality != "both" else ("CT" if i % 2 == 0 else "MR")
        entry, s, r = generate_series(seed, modality, args.kinds, args.out)
        entries.append(entry)
        if args.preview:
            write_preview(entry, s, r, args.preview)
    truth = {"generator": GENERATOR, "not_for_clinical_use": True, "series": entries}
    truth_path = args.truth or os.path.join(args.out, "truth.json")
    os.makedirs(os.path.dirname(os.path.abspath(truth_path)), exist_ok=True)
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    took = time.time() - start
    n_lesions = sum(len(e["lesions"]) for e in entries)
    print(f"{args.series} series, {n_lesions} lesions in {took:.1f} s ({took / args.series:.2f} s/series)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
