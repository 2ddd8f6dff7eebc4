"""Reference reader for the DICOM tests: pydicom's view of each file, written as JSON.

Usage: /usr/bin/python3 pydicom-reference.py meta FILE...        -> JSON list on stdout
       /usr/bin/python3 pydicom-reference.py pixels OUTDIR FILE... -> OUTDIR/<n>.raw + JSON list
Run with Debian's /usr/bin/python3 (python3-pydicom, python3-numpy, python3-gdcm).
"""
import json
import os
import sys

import numpy as np
import pydicom
from pydicom.pixel_data_handlers import gdcm_handler, numpy_handler, rle_handler, pillow_handler
from pydicom.pixel_data_handlers.util import convert_color_space


def text(ds, keyword):
    value = ds.get(keyword)
    if value is None:
        return None
    return str(value)


def meta(path):
    out = {"file": path}
    try:
        ds = pydicom.dcmread(path, force=False)
    except pydicom.errors.InvalidDicomError:
        # No File Meta Information: pydicom then needs force=True and guesses the encoding.
        try:
            ds = pydicom.dcmread(path, force=True)
            ds.SOPInstanceUID  # noqa: B018 - touch an element so bad data fails here
            out["forced"] = True
        except Exception as exc:  # noqa: BLE001 - we report every failure as data
            out["error"] = f"{type(exc).__name__}: {exc}"
            return out
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    fm = getattr(ds, "file_meta", None)
    out["transferSyntaxUid"] = str(fm.TransferSyntaxUID) if fm is not None and "TransferSyntaxUID" in fm else None
    for key, kw in [
        ("sopInstanceUid", "SOPInstanceUID"),
        ("sopClassUid", "SOPClassUID"),
        ("studyInstanceUid", "StudyInstanceUID"),
        ("seriesInstanceUid", "SeriesInstanceUID"),
        ("modality", "Modality"),
        ("patientId", "PatientID"),
        ("patientName", "PatientName"),
        ("photometricInterpretation", "PhotometricInterpretation"),
    ]:
        try:
            out[key] = text(ds, kw)
        except Exception as exc:  # noqa: BLE001
            out[key] = None
            out.setdefault("fieldErrors", []).append(f"{kw}: {exc}")
    for key, kw in [("rows", "Rows"), ("columns", "Columns"), ("bitsAllocated", "BitsAllocated"),
                    ("samplesPerPixel", "SamplesPerPixel"), ("pixelRepresentation", "PixelRepresentation")]:
        try:
            v = ds.get(kw)
            out[key] = int(v) if v is not None and v != "" else None
        except Exception:  # noqa: BLE001
            out[key] = None
    try:
        nf = ds.get("NumberOfFrames")
        out["numberOfFrames"] = int(nf) if nf not in (None, "") else 1
    except Exception:  # noqa: BLE001
        out["numberOfFrames"] = None
    try:
        out["hasPixelData"] = "PixelData" in ds
    except Exception:  # noqa: BLE001
        out["hasPixelData"] = False
    return out


HANDLERS = {
    "numpy": [numpy_handler],
    "rle": [rle_handler],
    "gdcm": [gdcm_handler],
    "pillow": [pillow_handler],
}


def pixels(outdir, spec):
    """spec is PATH or PATH::HANDLER (force one handler)."""
    path, _, handler = spec.partition("::")
    to_rgb = handler.endswith("+rgb")
    handler = handler.removesuffix("+rgb")
    out = {"file": path, "handler": handler or "default"}
    try:
        if handler:
            pydicom.config.pixel_data_handlers = HANDLERS[handler]
        else:
            pydicom.config.pixel_data_handlers = [numpy_handler, rle_handler, gdcm_handler, pillow_handler]
        ds = pydicom.dcmread(path)
        arr = ds.pixel_array
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    photometric = str(ds.PhotometricInterpretation)
    if to_rgb and photometric.startswith("YBR_FULL"):
        # pydicom's pillow handler returns JPEG YCbCr as stored; libjpeg/dcmtk output RGB.
        arr = convert_color_space(arr, photometric, "RGB")
        photometric = "RGB"
    frames = int(ds.get("NumberOfFrames", 1) or 1)
    spp = int(ds.SamplesPerPixel)
    # Normalise to (frames, rows, cols, samples) so the TypeScript side has one layout.
    if frames == 1:
        arr = arr[np.newaxis, ...]
    if spp == 1:
        arr = arr[..., np.newaxis]
    arr = np.ascontiguousarray(arr)
    name = f"{len(os.listdir(outdir))}.raw"
    arr.astype(arr.dtype.newbyteorder("<")).tofile(os.path.join(outdir, name))
    out.update({
        "raw": os.path.join(outdir, name),
        "dtype": arr.dtype.name,
        "shape": list(arr.shape),
        "photometric": photometric,
    })
    return out


def main():
    mode = sys.argv[1]
    if mode == "meta":
        print(json.dumps([meta(p) for p in sys.argv[2:]]))
    elif mode == "pixels":
        outdir = sys.argv[2]
        print(json.dumps([pixels(outdir, p) for p in sys.argv[3:]]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
