"""Two patients' studies for the query/retrieve tests (issue 14, item 2): pydicom's CT_small and
MR_small with new UIDs, names, dates and descriptions, each study one or two series. The data
sets keep their encoding; only identifying attributes change.

usage: qr_fixtures.py OUT_DIR TAG
Prints JSON: [{"file", "patient_id", "study", "series", "sop_instance", "study_date", "modality"}].
"""
import hashlib
import json
import os
import sys

import pydicom

CORPUS = '/usr/lib/python3/dist-packages/pydicom/data/test_files'

# (patient id suffix, patient name, study key, date, description, [(series key, modality, instances)])
STUDIES = [
    ('A', 'ALPHA^ANNA', 'a-2024', '20240301', 'CT CHEST', [('1', 'CT', 3), ('2', 'CT', 2)]),
    ('A', 'ALPHA^ANNA', 'a-2022', '20220510', 'MR HEAD', [('1', 'MR', 2)]),
    ('A', 'ALPHA^ANNA', 'a-2020', '20200115', 'CT HEAD', [('1', 'CT', 2)]),
    ('B', 'BRAVO^BEN', 'b-2023', '20230707', 'MR KNEE', [('1', 'MR', 2)]),
]


def uid(*parts):
    digits = str(int(hashlib.sha256('/'.join(map(str, parts)).encode()).hexdigest()[:24], 16))
    return f'1.2.826.0.1.3680043.10.1015.{digits}'[:64]


def main(out, tag):
    os.makedirs(out, exist_ok=True)
    written = []
    for suffix, name, study_key, date, description, series in STUDIES:
        patient_id = f'QR-{tag}-{suffix}'
        study = uid(tag, study_key)
        for series_key, modality, count in series:
            series_uid = uid(tag, study_key, series_key)
            for n in range(count):
                ds = pydicom.dcmread(os.path.join(CORPUS, 'CT_small.dcm' if modality == 'CT' else 'MR_small.dcm'))
                # DCMTK (Orthanc) drops trailing padding when it sends a data set; without it the
                # bytes Orthanc holds are the bytes it sends.
                if 0xFFFCFFFC in ds:
                    del ds[0xFFFCFFFC]
                ds.PatientID = patient_id
                ds.PatientName = name
                ds.StudyInstanceUID = study
                ds.SeriesInstanceUID = series_uid
                ds.SOPInstanceUID = uid(tag, study_key, series_key, n)
                ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
                ds.StudyDate = date
                ds.SeriesDate = date
                ds.StudyDescription = description
                ds.AccessionNumber = f'ACC{study_key.replace("-", "")}'[:16]
                ds.SeriesNumber = int(series_key)
                ds.InstanceNumber = n + 1
                ds.Modality = modality
                path = os.path.join(out, f'{study_key}-{series_key}-{n}.dcm')
                ds.save_as(path, write_like_original=False)
                written.append({
                    'file': path,
                    'patient_id': patient_id,
                    'study': study,
                    'series': series_uid,
                    'sop_instance': ds.SOPInstanceUID,
                    'study_date': date,
                    'modality': modality,
                })
    json.dump(written, sys.stdout)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
