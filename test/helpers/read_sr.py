"""Reads a DICOM SR file with pydicom and prints what a test checks, as JSON: the header
attributes, the evidence it references, and the whole content tree (each item's relationship,
value type, concept, value and children).

usage: read_sr.py FILE
"""
import json
import sys

import pydicom


def code(seq):
    item = seq[0]
    return {
        'value': item.get('CodeValue') or item.get('LongCodeValue'),
        'scheme': item.CodingSchemeDesignator,
        'meaning': item.CodeMeaning,
    }


def reference(item):
    ref = item.ReferencedSOPSequence[0]
    frames = ref.get('ReferencedFrameNumber')
    if frames is not None and not isinstance(frames, (list, pydicom.multival.MultiValue)):
        frames = [frames]
    return {
        'sop_class': ref.ReferencedSOPClassUID,
        'sop_instance': ref.ReferencedSOPInstanceUID,
        'frames': [int(f) for f in frames] if frames is not None else None,
    }


def content(item):
    out = {
        'relationship': item.get('RelationshipType'),
        'type': item.ValueType,
        'name': code(item.ConceptNameCodeSequence),
        'observed_at': item.get('ObservationDateTime'),
    }
    kind = item.ValueType
    if kind == 'TEXT':
        out['text'] = item.TextValue
    elif kind == 'CODE':
        out['code'] = code(item.ConceptCodeSequence)
    elif kind == 'NUM':
        measured = item.MeasuredValueSequence[0]
        out['numeric'] = str(measured.NumericValue)
        out['float'] = measured.get('FloatingPointValue')
        out['unit'] = code(measured.MeasurementUnitsCodeSequence)
    elif kind == 'UIDREF':
        out['uid'] = item.UID
    elif kind == 'PNAME':
        out['person'] = str(item.PersonName)
    elif kind == 'SCOORD':
        out['graphic_type'] = item.GraphicType
        out['graphic_data'] = [float(v) for v in item.GraphicData]
    elif kind in ('IMAGE', 'COMPOSITE'):
        out['ref'] = reference(item)
    elif kind == 'CONTAINER':
        templates = item.get('ContentTemplateSequence')
        out['template'] = templates[0].TemplateIdentifier if templates else None
    out['children'] = [content(c) for c in item.get('ContentSequence', [])]
    return out


def evidence(seq):
    out = []
    for study in seq or []:
        for series in study.ReferencedSeriesSequence:
            for sop in series.ReferencedSOPSequence:
                out.append({
                    'study': study.StudyInstanceUID,
                    'series': series.SeriesInstanceUID,
                    'sop_class': sop.ReferencedSOPClassUID,
                    'sop_instance': sop.ReferencedSOPInstanceUID,
                })
    return out


def main(path):
    ds = pydicom.dcmread(path)
    meta = ds.file_meta
    print(json.dumps({
        'transfer_syntax': meta.TransferSyntaxUID,
        'media_sop_class': meta.MediaStorageSOPClassUID,
        'media_sop_instance': meta.MediaStorageSOPInstanceUID,
        'implementation_class': meta.ImplementationClassUID,
        'sop_class': ds.SOPClassUID,
        'sop_instance': ds.SOPInstanceUID,
        'charset': ds.get('SpecificCharacterSet'),
        'patient_name': str(ds.PatientName),
        'patient_id': ds.PatientID,
        'study_uid': ds.StudyInstanceUID,
        'series_uid': ds.SeriesInstanceUID,
        'modality': ds.Modality,
        'content_date': ds.ContentDate,
        'content_time': ds.ContentTime,
        'completion': ds.CompletionFlag,
        'verification': ds.VerificationFlag,
        'verifying': [
            {'name': str(v.VerifyingObserverName), 'at': v.VerificationDateTime}
            for v in ds.get('VerifyingObserverSequence', [])
        ],
        'evidence': evidence(ds.get('CurrentRequestedProcedureEvidenceSequence')),
        'other_evidence': evidence(ds.get('PertinentOtherEvidenceSequence')),
        'tree': content(ds),
    }, ensure_ascii=False))


if __name__ == '__main__':
    main(sys.argv[1])
