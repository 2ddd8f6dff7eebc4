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
      [--truth truth.json] [--size 256] [--kinds tumor,hemorrhage|none] [--raw RAWDIR]
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
