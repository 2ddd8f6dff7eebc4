"""Rewrites a phantom series (phantoms.py) as a series of a given patient and study, for the
worklist's study-level tests (issue 11): patient ID and name, study UID, date, description and
accession, series number. Series and instance UIDs and the pixels stay as generated. The files
keep phantoms.py's character set (ISO_IR 100), so a name such as MÜLLER^HANS is stored in
Latin-1 and must be decoded, not guessed.

usage: retag_study.py SERIES_DIR SPEC_JSON
SPEC_JSON: {"patient_id", "patient_name", "study_uid", "date", "description", "accession", "number"}
"""
import glob
import json
import os
import sys

import pydicom


def main(argv):
    folder, spec = argv[0], json.loads(argv[1])
    for path in sorted(glob.glob(os.path.join(folder, '*.dcm'))):
        ds = pydicom.dcmread(path)
        ds.PatientID = spec['patient_id']
        ds.PatientName = spec['patient_name']
        ds.StudyInstanceUID = spec['study_uid']
        ds.StudyDate = spec['date']
        ds.SeriesDate = spec['date']
        ds.ContentDate = spec['date']
        ds.StudyDescription = spec['description']
        ds.AccessionNumber = spec['accession']
        ds.SeriesNumber = spec['number']
        ds.save_as(path, write_like_original=False)


if __name__ == '__main__':
    main(sys.argv[1:])
