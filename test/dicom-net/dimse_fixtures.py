"""Writes real DICOM files for the DIMSE tests (issue 14): pydicom's test images in several
transfer syntaxes, and CT_small recast as other image storage classes (CR, DX, MG, US, SC, XA,
RF, NM, PT, MR), each with new UIDs under one study per call, so a C-STORE of them never
collides with another test's instances. The data sets keep their encoding (no re-compression).

usage: dimse_fixtures.py OUT_DIR STUDY_TAG
Prints JSON: [{"file", "transfer_syntax", "sop_class", "sop_instance", "study_instance"}].
"""
import hashlib
import json
import os
import sys

import pydicom

CORPUS = '/usr/lib/python3/dist-packages/pydicom/data/test_files'

# One file per syntax mia decodes (besides Explicit VR Little Endian, which the recasts cover).
SYNTAX_SAMPLES = [
    'MR_small_implicit.dcm',
    'MR_small_bigendian.dcm',
    'image_dfl.dcm',
    'MR_small_RLE.dcm',
    'SC_rgb_jpeg_dcmtk.dcm',
    'JPEG2000.dcm',
    'MR_small_jp2klossless.dcm',
    'MR_small_jpeg_ls_lossless.dcm',
    'JPGExtended.dcm',
]

RECASTS = [
    ('1.2.840.10008.5.1.4.1.1.1', 'CR'),
    ('1.2.840.10008.5.1.4.1.1.1.1', 'DX'),
    ('1.2.840.10008.5.1.4.1.1.1.2', 'MG'),
    ('1.2.840.10008.5.1.4.1.1.6.1', 'US'),
    ('1.2.840.10008.5.1.4.1.1.7', 'OT'),
    ('1.2.840.10008.5.1.4.1.1.12.1', 'XA'),
    ('1.2.840.10008.5.1.4.1.1.12.2', 'RF'),
    ('1.2.840.10008.5.1.4.1.1.20', 'NM'),
    ('1.2.840.10008.5.1.4.1.1.128', 'PT'),
    ('1.2.840.10008.5.1.4.1.1.4', 'MR'),
    ('1.2.840.10008.5.1.4.1.1.2', 'CT'),
]


def uid(*parts):
    digits = str(int(hashlib.sha256('/'.join(map(str, parts)).encode()).hexdigest()[:24], 16))
    return f'1.2.826.0.1.3680043.10.1014.{digits}'[:64]


def main(out, tag):
    os.makedirs(out, exist_ok=True)
    study = uid(tag, 'study')
    written = []

    def save(ds, name, series_key):
        ds.StudyInstanceUID = study
        ds.SeriesInstanceUID = uid(tag, 'series', series_key)
        ds.SOPInstanceUID = uid(tag, 'instance', name)
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
        ds.PatientID = f'DIMSE-{tag}'
        path = os.path.join(out, name)
        # The encoding of the source is kept: only UIDs change, in place.
        ds.save_as(path, write_like_original=False)
        written.append({'file': path, 'transfer_syntax': str(ds.file_meta.TransferSyntaxUID), 'sop_class': str(ds.SOPClassUID), 'sop_instance': str(ds.SOPInstanceUID), 'study_instance': study})

    for name in SYNTAX_SAMPLES:
        ds = pydicom.dcmread(os.path.join(CORPUS, name))
        save(ds, f'syntax-{name}', name)
    for sop_class, modality in RECASTS:
        ds = pydicom.dcmread(os.path.join(CORPUS, 'CT_small.dcm'))
        ds.SOPClassUID = sop_class
        ds.Modality = modality
        save(ds, f'recast-{modality}.dcm', modality)
    print(json.dumps(written))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
