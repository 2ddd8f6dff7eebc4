#!/usr/bin/python3
"""Small single-instance studies for the QIDO-RS study search benchmark (bench/dicom.bench.ts).

NOT PATIENT DATA: names are drawn from common-surname and given-name lists. Each study is one
series of one 16x16 image, so the archive's size is the index, not the pixels. Patients have 1-6
studies (as a PACS holds priors); study dates spread over ten years; CT, MR, CR and US with their
own storage SOP classes. A pure function of --seed (random.Random), so every run builds the same
studies with the same UIDs.

  /usr/bin/python3 qido-studies.py --out DIR --studies 10000 --seed 1 --manifest studies.json

The manifest lists each study's attributes, from which the benchmark picks its query values.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import uuid

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, PYDICOM_IMPLEMENTATION_UID

SURNAMES = (
    'SMITH SMYTHE SMILEY SMIRNOV SMIT SMALL JOHNSON WILLIAMS BROWN JONES GARCIA MILLER DAVIS '
    'RODRIGUEZ MARTINEZ HERNANDEZ LOPEZ GONZALEZ WILSON ANDERSON THOMAS TAYLOR MOORE JACKSON '
    'MARTIN LEE PEREZ THOMPSON WHITE HARRIS SANCHEZ CLARK RAMIREZ LEWIS ROBINSON WALKER YOUNG '
    'ALLEN KING WRIGHT SCOTT TORRES NGUYEN HILL FLORES GREEN ADAMS NELSON BAKER HALL RIVERA '
    'CAMPBELL MITCHELL CARTER ROBERTS MUELLER SCHMIDT SCHNEIDER FISCHER WEBER MEYER WAGNER '
    'BECKER SCHULZ HOFFMANN DUBOIS DURAND LEROY MOREAU ROSSI RUSSO FERRARI ESPOSITO BIANCHI '
    "KOWALSKI NOWAK WISNIEWSKI JANSEN DEVRIES VANDENBERG O'BRIEN MCCARTHY MACDONALD PETERSEN "
    'NIELSEN HANSEN ANDERSSON JOHANSSON KARLSSON TANAKA SUZUKI SATO WATANABE KIM PARK CHOI'
).split()
GIVEN = (
    'JAMES MARY JOHN PATRICIA ROBERT JENNIFER MICHAEL LINDA WILLIAM ELIZABETH DAVID BARBARA '
    'RICHARD SUSAN JOSEPH JESSICA THOMAS SARAH CHARLES KAREN ANNA LUCAS EMMA NOAH SOPHIE '
    'HANNAH PAUL MARIE PIERRE GIULIA MARCO LAURA PETER ANNE JAN EVA OLIVIA LIAM MIA ELIAS '
    'YUKI HIROSHI MIN JI SAMUEL RUTH DANIEL CLAIRE FELIX ISABEL'
).split()
MIDDLE = ['', '', '', 'A', 'B', 'J', 'M', 'R']

# Modality -> (SOP Class UID, bits allocated, study descriptions)
KINDS = {
    'CT': ('1.2.840.10008.5.1.4.1.1.2', 16, ['CT HEAD W/O CONTRAST', 'CT CHEST ABDOMEN PELVIS', 'CT ANGIO HEAD NECK', 'CT LUNG SCREENING']),
    'MR': ('1.2.840.10008.5.1.4.1.1.4', 16, ['MR BRAIN W/WO CONTRAST', 'MR KNEE LEFT', 'MR LUMBAR SPINE', 'MR PROSTATE']),
    'CR': ('1.2.840.10008.5.1.4.1.1.1', 16, ['XR CHEST PA AND LATERAL', 'XR HAND RIGHT', 'XR PELVIS AP']),
    'US': ('1.2.840.10008.5.1.4.1.1.6.1', 8, ['US ABDOMEN COMPLETE', 'US THYROID', 'US OB 2ND TRIMESTER']),
}
MODALITY_WEIGHTS = [('CT', 35), ('MR', 25), ('CR', 25), ('US', 15)]
FIRST_DAY = datetime.date(2016, 1, 1)
DAYS = 3653


def uid(rng: random.Random) -> str:
    return '2.25.' + str(uuid.UUID(int=rng.getrandbits(128), version=4).int)


def patient(rng: random.Random, index: int) -> dict:
    name = f'{rng.choice(SURNAMES)}^{rng.choice(GIVEN)}'
    middle = rng.choice(MIDDLE)
    if middle:
        name += f'^{middle}'
    birth = datetime.date(1930, 1, 1) + datetime.timedelta(days=rng.randrange(0, 33000))
    return {
        'name': name,
        'id': f'P{index:07d}',
        'birth': birth.strftime('%Y%m%d'),
        'sex': rng.choice('MF'),
    }


def study_file(rng: random.Random, who: dict, index: int) -> tuple[Dataset, dict]:
    modality = rng.choices([m for m, _ in MODALITY_WEIGHTS], [w for _, w in MODALITY_WEIGHTS])[0]
    sop_class, bits, descriptions = KINDS[modality]
    day = FIRST_DAY + datetime.timedelta(days=rng.randrange(DAYS))
    time = f'{rng.randrange(7, 20):02d}{rng.randrange(60):02d}{rng.randrange(60):02d}'
    study_uid, series_uid, sop_uid = uid(rng), uid(rng), uid(rng)

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID

    ds = Dataset()
    ds.file_meta = meta
    ds.SpecificCharacterSet = 'ISO_IR 100'
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = sop_uid
    ds.StudyDate = day.strftime('%Y%m%d')
    ds.StudyTime = time
    ds.SeriesDate = ds.StudyDate
    ds.AccessionNumber = f'A{index + 1:08d}'
    ds.Modality = modality
    ds.Manufacturer = 'MIA BENCH'
    ds.ReferringPhysicianName = f'{rng.choice(SURNAMES)}^{rng.choice(GIVEN)}'
    ds.StudyDescription = rng.choice(descriptions)
    ds.SeriesDescription = ds.StudyDescription
    ds.PatientName = who['name']
    ds.PatientID = who['id']
    ds.PatientBirthDate = who['birth']
    ds.PatientSex = who['sex']
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.StudyID = str(index + 1)
    ds.SeriesNumber = 1
    ds.InstanceNumber = 1
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = 'MONOCHROME2'
    ds.Rows = 16
    ds.Columns = 16
    ds.BitsAllocated = bits
    ds.BitsStored = bits if bits == 8 else 12
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = 0
    if modality in ('CT', 'MR'):
        ds.ImagePositionPatient = [0.0, 0.0, 0.0]
        ds.ImageOrientationPatient = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        ds.PixelSpacing = [1.0, 1.0]
        ds.SliceThickness = 1.0
    if modality == 'CT':
        ds.RescaleIntercept = -1024
        ds.RescaleSlope = 1
        ds.KVP = 120
    dtype = np.uint16 if bits == 16 else np.uint8
    top = 4096 if bits == 16 else 256
    ds.PixelData = np.random.default_rng(index).integers(0, top, (16, 16), dtype=dtype).tobytes()
    row = {
        'study_uid': study_uid,
        'patient_name': who['name'],
        'patient_id': who['id'],
        'study_date': ds.StudyDate,
        'modality': modality,
        'accession': ds.AccessionNumber,
    }
    return ds, row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--out', required=True)
    p.add_argument('--studies', type=int, default=10000)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--manifest', required=True)
    args = p.parse_args()
    if not 1 <= args.studies <= 1_000_000:
        raise SystemExit('--studies: 1 to 1,000,000')
    rng = random.Random(args.seed)
    rows = []
    patients = 0
    made = 0
    while made < args.studies:
        who = patient(rng, patients)
        patients += 1
        for _ in range(min(rng.choice([1, 1, 1, 2, 2, 3, 4, 6]), args.studies - made)):
            ds, row = study_file(rng, who, made)
            folder = os.path.join(args.out, f'{made // 1000:03d}')
            os.makedirs(folder, exist_ok=True)
            ds.is_little_endian = True
            ds.is_implicit_VR = False
            ds.save_as(os.path.join(folder, f'{made:05d}.dcm'), write_like_original=False)
            rows.append(row)
            made += 1
    with open(args.manifest, 'w', encoding='utf-8') as f:
        json.dump({'patients': patients, 'studies': rows}, f)


if __name__ == '__main__':
    main()
