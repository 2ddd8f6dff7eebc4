"""A CT phantom of known size and HU for the measurement tools' tests (issue 11).

200 x 200 pixels, Pixel Spacing 0.8\\0.5 (rows 0.8 mm apart, columns 0.5 mm: non-square, so
lengths and areas must use both). Air (-1000 HU) with a block at columns 40..159 and rows
50..149 (60 mm wide, 80 mm tall) whose pixels are 40 HU +/- 10 in a checkerboard (mean 40,
SD 10). Stored as signed 16-bit with Rescale Intercept -1024.

usage: measure_phantom.py OUT.dcm
"""
import sys

import numpy as np
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

CT_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.2'

out = sys.argv[1]
hu = np.full((200, 200), -1000, dtype=np.int32)
rows, cols = np.mgrid[0:200, 0:200]
checker = np.where((rows + cols) % 2 == 0, 10, -10)
block = (cols >= 40) & (cols < 160) & (rows >= 50) & (rows < 150)
hu[block] = 40 + checker[block]
stored = (hu + 1024).astype(np.int16)

meta = FileMetaDataset()
meta.MediaStorageSOPClassUID = CT_IMAGE_STORAGE
meta.MediaStorageSOPInstanceUID = generate_uid()
meta.TransferSyntaxUID = ExplicitVRLittleEndian
ds = FileDataset(out, {}, file_meta=meta, preamble=b'\0' * 128)
ds.SOPClassUID = CT_IMAGE_STORAGE
ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
ds.StudyInstanceUID = generate_uid()
ds.SeriesInstanceUID = generate_uid()
ds.PatientID = 'MEASURE-PHANTOM'
ds.PatientName = 'Phantom^Measure'
ds.StudyDate = '20260101'
ds.Modality = 'CT'
ds.SeriesDescription = 'measurement phantom 0.8x0.5 mm'
ds.SeriesNumber = 1
ds.InstanceNumber = 1
ds.ImagePositionPatient = [0, 0, 0]
ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
ds.PixelSpacing = [0.8, 0.5]
ds.SliceThickness = 1
ds.Rows = 200
ds.Columns = 200
ds.SamplesPerPixel = 1
ds.PhotometricInterpretation = 'MONOCHROME2'
ds.BitsAllocated = 16
ds.BitsStored = 16
ds.HighBit = 15
ds.PixelRepresentation = 1
ds.RescaleIntercept = -1024
ds.RescaleSlope = 1
ds.WindowCenter = 40
ds.WindowWidth = 400
ds.PixelData = stored.tobytes()
ds.is_little_endian = True
ds.is_implicit_VR = False
ds.save_as(out, write_like_original=False)
