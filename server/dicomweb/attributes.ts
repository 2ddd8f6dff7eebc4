/**
 * The attributes a QIDO-RS search knows (PS3.18 10.6.1.2.1, Tables 10.6.3-3/4/5): keyword, tag,
 * VR, the level whose table holds them and, when mia indexes them, the column they match on.
 * Attributes without a column are returned (empty, as Type 2) but cannot be matched on.
 */
import type { QidoColumn, QidoLevel } from '#server/store/dicomweb-index.ts';

export type QidoAttribute = {
  keyword: string;
  /** Eight upper-case hex digits, as DICOM JSON names them (PS3.18 F.2.1). */
  tag: string;
  vr: string;
  level: QidoLevel;
  column: QidoColumn | null;
  /** Returned without includefield (the tables' required return attributes). */
  required: boolean;
};

const OPTIONAL = new Set(['StudyDescription', 'BodyPartExamined', 'AvailableTransferSyntaxUID']);
const attribute = (keyword: string, tag: string, vr: string, level: QidoLevel, column: QidoColumn | null): QidoAttribute => ({
  keyword,
  tag,
  vr,
  level,
  column,
  required: !OPTIONAL.has(keyword),
});

export const QIDO_ATTRIBUTES: readonly QidoAttribute[] = [
  attribute('StudyDate', '00080020', 'DA', 'study', 'study_date'),
  attribute('StudyTime', '00080030', 'TM', 'study', 'study_time'),
  attribute('AccessionNumber', '00080050', 'SH', 'study', 'accession_number'),
  attribute('ModalitiesInStudy', '00080061', 'CS', 'study', null),
  attribute('ReferringPhysicianName', '00080090', 'PN', 'study', null),
  attribute('StudyDescription', '00081030', 'LO', 'study', 'study_description'),
  attribute('PatientName', '00100010', 'PN', 'study', 'patient_name'),
  attribute('PatientID', '00100020', 'LO', 'study', 'patient_id'),
  attribute('PatientBirthDate', '00100030', 'DA', 'study', 'patient_birth_date'),
  attribute('PatientSex', '00100040', 'CS', 'study', 'patient_sex'),
  attribute('StudyInstanceUID', '0020000D', 'UI', 'study', 'study_uid'),
  attribute('StudyID', '00200010', 'SH', 'study', null),
  attribute('NumberOfStudyRelatedSeries', '00201206', 'IS', 'study', null),
  attribute('NumberOfStudyRelatedInstances', '00201208', 'IS', 'study', null),
  attribute('Modality', '00080060', 'CS', 'series', 'modality'),
  attribute('SeriesDescription', '0008103E', 'LO', 'series', 'series_description'),
  attribute('BodyPartExamined', '00180015', 'CS', 'series', 'body_part'),
  attribute('SeriesInstanceUID', '0020000E', 'UI', 'series', 'series_uid'),
  attribute('SeriesNumber', '00200011', 'IS', 'series', 'series_number'),
  attribute('NumberOfSeriesRelatedInstances', '00201209', 'IS', 'series', null),
  attribute('PerformedProcedureStepStartDate', '00400244', 'DA', 'series', null),
  attribute('PerformedProcedureStepStartTime', '00400245', 'TM', 'series', null),
  attribute('SOPClassUID', '00080016', 'UI', 'instance', 'sop_class_uid'),
  attribute('SOPInstanceUID', '00080018', 'UI', 'instance', 'sop_instance_uid'),
  attribute('AvailableTransferSyntaxUID', '00083002', 'UI', 'instance', null),
  attribute('InstanceNumber', '00200013', 'IS', 'instance', 'instance_number'),
  attribute('NumberOfFrames', '00280008', 'IS', 'instance', null),
  attribute('Rows', '00280010', 'US', 'instance', null),
  attribute('Columns', '00280011', 'US', 'instance', null),
  attribute('BitsAllocated', '00280100', 'US', 'instance', null),
];

/** Present in every result (PS3.18 10.6.3.3.1): RetrieveURL, and InstanceAvailability (all ONLINE here). */
export const RETRIEVE_URL = '00081190';
export const INSTANCE_AVAILABILITY = '00080056';
export const SPECIFIC_CHARACTER_SET = '00080005';

const BY_KEYWORD = new Map(QIDO_ATTRIBUTES.map((a) => [a.keyword.toLowerCase(), a]));
const BY_TAG = new Map(QIDO_ATTRIBUTES.map((a) => [a.tag, a]));

/** An attribute named by keyword (any case) or by tag (ggggeeee, with or without a 0x). */
export function findAttribute(name: string): QidoAttribute | undefined {
  const tag = /^(?:0x)?([0-9a-f]{8})$/i.exec(name)?.[1];
  return tag ? BY_TAG.get(tag.toUpperCase()) : BY_KEYWORD.get(name.toLowerCase());
}

const LEVEL_ORDER: Readonly<Record<QidoLevel, number>> = { study: 0, series: 1, instance: 2 };

/**
 * What a result at `level` carries by default (Tables 10.6.3-3/4/5): its own level's attributes,
 * and for searches across studies or series the levels above (PS3.18 10.6.3.3.1: /series and
 * /instances return study attributes too).
 */
export function defaultReturn(level: QidoLevel, fromLevel: QidoLevel): QidoAttribute[] {
  return QIDO_ATTRIBUTES.filter((a) => {
    if (!a.required) return false;
    if (a.level === level) return true;
    if (a.keyword === 'StudyInstanceUID' || (level === 'instance' && a.keyword === 'SeriesInstanceUID')) return true;
    return LEVEL_ORDER[a.level] < LEVEL_ORDER[level] && LEVEL_ORDER[a.level] >= LEVEL_ORDER[fromLevel];
  });
}

export function levelAllows(resultLevel: QidoLevel, attributeLevel: QidoLevel): boolean {
  return LEVEL_ORDER[attributeLevel] <= LEVEL_ORDER[resultLevel];
}
