"""Builds an Enhanced CT Image (1.2.840.10008.5.1.4.1.1.2.1) multi-frame file from a classic
one-file-per-slice CT series (phantoms.py's), or an Enhanced MR Image (1.2.840.10008.5.1.4.1.1.4.1)
from an MR series, with the rescale, pixel spacing, plane position and
orientation and window values only in the functional groups (PS3.3 C.7.6.16, C.8.15), so a
reader that looks at top-level attributes alone sees none of them.

usage: enhanced_ct.py CLASSIC_DIR OUT_FILE [--per-frame-intercept] [--drop-last-item] [--interleave] [--tilt-frame]
                       [--slope S]
  --per-frame-intercept  odd frames store values 24 higher with intercept 24 lower, in their
                         own Pixel Value Transformation items (same modality values as classic)
  --drop-last-item       the Per-frame Functional Groups Sequence misses its last item
  --interleave           frames stored as an interleaved acquisition: even slices, then odd ones
                         (each frame keeps its own Plane Position)
  --tilt-frame           frame 1 has its own Plane Orientation, tilted from the shared one
  --slope S              (MR) each frame's Pixel Value Transformation has Rescale Slope S, as Philips
                         writes it (nibabel's philips_mprage.dcm: 2.108); the window is scaled to match
Prints JSON: {series_uid, instance_uid, frames, classic: [sop uid per frame, in order]}.
"""
import glob
import json
import os
import sys

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileDataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import UID, ExplicitVRLittleEndian

ENHANCED_CT = '1.2.840.10008.5.1.4.1.1.2.1'
ENHANCED_MR = '1.2.840.10008.5.1.4.1.1.4.1'


def item(**values):
    ds = Dataset()
    for k, v in values.items():
        setattr(ds, k, v)
    return ds


def main(argv):
    src, out = argv[0], argv[1]
    per_frame_intercept = '--per-frame-intercept' in argv
    drop_last = '--drop-last-item' in argv
    interleave = '--interleave' in argv
    tilt = '--tilt-frame' in argv
    slope = float(argv[argv.index('--slope') + 1]) if '--slope' in argv else None
    slices = [pydicom.dcmread(p) for p in glob.glob(os.path.join(src, '*.dcm'))]
    slices.sort(key=lambda d: float(d.ImagePositionPatient[2]))
    if interleave:
        slices = slices[0::2] + slices[1::2]
    first = slices[0]
    n = len(slices)
    mr = first.Modality == 'MR'
    sop_class = ENHANCED_MR if mr else ENHANCED_CT
    # New UIDs derived from the classic ones, so both forms can live in one archive.
    suffix = '.9' if not per_frame_intercept else '.8'
    if drop_last:
        suffix += '1'
    if interleave:
        suffix += '2'
    if tilt:
        suffix += '3'
    if slope is not None:
        suffix += '4'
    series_uid = (first.SeriesInstanceUID + suffix)[:64]
    instance_uid = (first.SOPInstanceUID + suffix + '1')[:64]

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = UID(sop_class)
    meta.MediaStorageSOPInstanceUID = UID(instance_uid)
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(out, {}, file_meta=meta, preamble=b'\0' * 128)
    ds.is_little_endian = True
    ds.is_implicit_VR = False
    for keyword in ('SpecificCharacterSet', 'StudyDate', 'StudyTime', 'AccessionNumber', 'Modality',
                    'Manufacturer', 'ReferringPhysicianName', 'StudyDescription', 'PatientName', 'PatientID',
                    'PatientBirthDate', 'PatientSex', 'BodyPartExamined', 'StudyInstanceUID', 'StudyID',
                    'FrameOfReferenceUID', 'PositionReferenceIndicator', 'SamplesPerPixel',
                    'PhotometricInterpretation', 'Rows', 'Columns', 'BitsAllocated', 'BitsStored',
                    'HighBit', 'PixelRepresentation'):
        setattr(ds, keyword, getattr(first, keyword))
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = instance_uid
    ds.SeriesInstanceUID = series_uid
    ds.SeriesDescription = 'Enhanced ' + first.SeriesDescription
    ds.SeriesNumber = 3
    ds.InstanceNumber = 1
    ds.ImageType = ['DERIVED', 'SECONDARY', 'AXIAL', 'NONE']
    ds.NumberOfFrames = n
    ds.ContentDate = first.StudyDate
    ds.ContentTime = first.StudyTime

    shared = item(
        PixelMeasuresSequence=Sequence([item(PixelSpacing=first.PixelSpacing, SliceThickness=first.SliceThickness)]),
        PlaneOrientationSequence=Sequence([item(ImageOrientationPatient=first.ImageOrientationPatient)]),
        FrameVOILUTSequence=Sequence([item(
            WindowCenter=f'{float(first.WindowCenter) * (slope or 1):g}', WindowWidth=f'{float(first.WindowWidth) * (slope or 1):g}')]),
    )
    if not per_frame_intercept and not mr:
        shared.PixelValueTransformationSequence = Sequence([item(
            RescaleIntercept=first.RescaleIntercept, RescaleSlope=first.RescaleSlope, RescaleType='HU')])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])

    frames = []
    pixels = []
    for k, s in enumerate(slices):
        stored = s.pixel_array.astype(np.int64)
        group = item(
            FrameContentSequence=Sequence([item(InStackPositionNumber=k + 1, StackID='1')]),
            PlanePositionSequence=Sequence([item(ImagePositionPatient=s.ImagePositionPatient)]),
        )
        if per_frame_intercept:
            shift = 24 if k % 2 == 1 else 0
            stored = stored + shift
            group.PixelValueTransformationSequence = Sequence([item(
                RescaleIntercept=f'{float(s.RescaleIntercept) - shift:g}', RescaleSlope=s.RescaleSlope, RescaleType='HU')])
        if slope is not None:
            group.PixelValueTransformationSequence = Sequence([item(RescaleIntercept='0', RescaleSlope=f'{slope:g}', RescaleType='US')])
        assert stored.max() <= 65535
        pixels.append(stored.astype('<u2'))
        frames.append(group)
    if drop_last:
        frames = frames[:-1]
    if tilt:
        frames[1].PlaneOrientationSequence = Sequence([item(ImageOrientationPatient=['1', '0', '0', '0', '0.8', '0.6'])])
    ds.PerFrameFunctionalGroupsSequence = Sequence(frames)
    ds.PixelData = np.ascontiguousarray(np.stack(pixels)).tobytes()
    ds.save_as(out, write_like_original=False)
    print(json.dumps({'series_uid': series_uid, 'instance_uid': instance_uid, 'frames': n,
                      'classic': [str(s.SOPInstanceUID) for s in slices]}))


if __name__ == '__main__':
    main(sys.argv[1:])
