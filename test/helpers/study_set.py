"""Writes copies of a classic phantom series (phantoms.py) as other series and studies of one
patient, for the viewer's layout and sync tests (issue 11, study-level reading): a new study
and series UID, study date, series number, orientation and slice positions; the pixels stay.

usage: study_set.py SRC_DIR OUT_DIR SPEC_JSON
SPEC_JSON: {"patient_id", "series": [{"name", "study", "date", "number", "plane": "axial"|"sagittal",
            "first_mm", "step_mm", "description"}]}
Prints JSON: {name: {"series_uid", "positions": [position along the slice normal per file]}}.
"""
import glob
import hashlib
import json
import os
import sys

import pydicom
from pydicom.uid import UID


def uid(*parts):
    # A stable UID under the phantoms' root: a hash of the parts, as decimal digits.
    digits = str(int(hashlib.sha256('/'.join(map(str, parts)).encode()).hexdigest()[:24], 16))
    return f'1.2.826.0.1.3680043.10.1001.{digits}'[:64]


def main(argv):
    src, out, spec = argv[0], argv[1], json.loads(argv[2])
    files = sorted(glob.glob(os.path.join(src, '*.dcm')))
    slices = sorted((pydicom.dcmread(p) for p in files), key=lambda d: float(d.ImagePositionPatient[2]))
    result = {}
    for s in spec['series']:
        folder = os.path.join(out, s['name'])
        os.makedirs(folder, exist_ok=True)
        series_uid = uid('series', spec['patient_id'], s['name'])
        positions = []
        for k, ds in enumerate(slices):
            sop = uid('sop', spec['patient_id'], s['name'], k)
            ds.file_meta.MediaStorageSOPInstanceUID = UID(sop)
            ds.SOPInstanceUID = sop
            ds.PatientID = spec['patient_id']
            ds.PatientName = 'LAYOUT^TEST'
            ds.StudyInstanceUID = uid('study', spec['patient_id'], s['study'])
            ds.StudyDate = s['date']
            ds.SeriesDate = s['date']
            ds.ContentDate = s['date']
            ds.StudyDescription = s.get('study_description', 'HEAD')
            ds.AccessionNumber = f"ACC{s['study']}"[:16]
            ds.SeriesInstanceUID = series_uid
            ds.SeriesNumber = s['number']
            ds.SeriesDescription = s['description']
            ds.InstanceNumber = k + 1
            # Each study its own frame of reference: a prior's coordinates are not this study's.
            ds.FrameOfReferenceUID = uid('for', spec['patient_id'], s['study'])
            p = s['first_mm'] + k * s['step_mm']
            half = float(ds.ImagePositionPatient[0])
            if s['plane'] == 'sagittal':
                # Rows run posterior (+y), columns down (-z): the normal row x column is -x,
                # so the position along it is -x.
                ds.ImageOrientationPatient = ['0', '1', '0', '0', '0', '-1']
                ds.ImagePositionPatient = [f'{-p:.4f}', f'{half:.4f}', f'{-half:.4f}']
            else:
                ds.ImageOrientationPatient = ['1', '0', '0', '0', '1', '0']
                ds.ImagePositionPatient = [f'{half:.4f}', f'{half:.4f}', f'{p:.4f}']
            ds.SliceLocation = f'{p:.4f}'
            positions.append(p)
            ds.save_as(os.path.join(folder, f'IM{k + 1:04d}.dcm'), write_like_original=False)
        result[s['name']] = {'series_uid': series_uid, 'positions': positions}
    print(json.dumps(result))


if __name__ == '__main__':
    main(sys.argv[1:])
