/**
 * QIDO-RS (PS3.18 10.6): a search's query parameters become matching conditions on the archive
 * index (PS3.4 C.2.2.2 matching: single value, list of UIDs, wildcard * and ?, date and time
 * ranges, fuzzy person names), and the matching rows become DICOM JSON (PS3.18 F.2). Nothing is
 * read from files: every searchable attribute is a column of the index.
 */
import { MiaError } from '#server/errors.ts';
import {
  defaultReturn,
  findAttribute,
  INSTANCE_AVAILABILITY,
  levelAllows,
  QIDO_ATTRIBUTES,
  RETRIEVE_URL,
  type QidoAttribute,
} from '#server/dicomweb/attributes.ts';
import { searchIndex, type QidoCondition, type QidoLevel, type QidoRow } from '#server/store/dicomweb-index.ts';
import { searchFold, searchWords } from '#server/store/search-fold.ts';
import type { Services } from '#server/services.ts';

/** At most this many results per response; a larger limit is capped and a Warning says so. */
export const QIDO_MAX_LIMIT = 1000;
/** Deeper pages than this are refused: paging that far is a scan, not a search. */
export const QIDO_MAX_OFFSET = 1_000_000;

export type QidoQuery = Readonly<Record<string, string | readonly string[] | undefined>>;

/** Where a search runs: its result level, and the study and series its path names. */
export type QidoScope = { level: QidoLevel; studyUid?: string | undefined; seriesUid?: string | undefined };

export type DicomJson = Record<string, { vr: string; Value?: unknown[] }>;

export type QidoResult = { items: DicomJson[]; patientIds: string[]; warning: string | null };

const RESERVED = new Set(['limit', 'offset', 'fuzzymatching', 'includefield']);

function bad(parameter: string, problem: string): MiaError {
  return new MiaError('invalid', `Invalid query parameter ${parameter}`, `${parameter}: ${problem}`);
}

function valuesOf(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  return typeof value === 'string' ? [value] : [...value];
}

function single(query: QidoQuery, name: string): string | undefined {
  const values = valuesOf(query[name]);
  if (values.length > 1) throw bad(name, 'given more than once');
  return values[0];
}

function integerParam(query: QidoQuery, name: string, max: number): number | undefined {
  const raw = single(query, name);
  if (raw === undefined) return undefined;
  if (!/^\d{1,12}$/.test(raw)) throw bad(name, 'expected a non-negative integer');
  const n = Number(raw);
  if (n > max) throw bad(name, `at most ${max}`);
  return n;
}

const DATE = /^\d{8}$/;
const TIME = /^\d{2}(\d{2}(\d{2}(\.\d{1,6})?)?)?$/;
const UID = /^[0-9]+(\.[0-9]+)*$/;

function rangeCondition(a: QidoAttribute, value: string, format: RegExp, what: string): QidoCondition {
  if (!a.column) throw new MiaError('internal', `range on unindexed ${a.keyword}`);
  const dash = value.indexOf('-');
  const from = dash < 0 ? value : value.slice(0, dash);
  const to = dash < 0 ? value : value.slice(dash + 1);
  for (const part of [from, to]) {
    if (part !== '' && !format.test(part)) throw bad(a.keyword, `expected ${what} or a range ${what}-${what}, got '${value.slice(0, 40)}'`);
  }
  if (from === '' && to === '') throw bad(a.keyword, 'an empty range');
  if (dash < 0) return { kind: 'equals', column: a.column, value, folded: false };
  // A time range compares as text: HHMMSS values of different precision sort by their prefix.
  // Times compare as text: '120000.5' is within a range up to '120000', so the end gets a high suffix.
  const end = to === '' ? null : what === 'HHMMSS' ? `${to}\uffff` : to;
  return { kind: 'range', column: a.column, from: from === '' ? null : from, to: end };
}

function conditionFor(a: QidoAttribute, value: string, fuzzy: boolean): QidoCondition | null {
  if (value === '' || value === '*') return null; // universal matching: the attribute is returned
  if (a.keyword === 'ModalitiesInStudy') {
    const values = value.split(/[,\\]/).map((v) => v.trim()).filter((v) => v !== '');
    if (values.some((v) => !/^[A-Z0-9_ ]{1,16}$/.test(v))) throw bad(a.keyword, 'expected modality codes (CT, MR...)');
    return { kind: 'modality-in-study', values };
  }
  if (!a.column) throw bad(a.keyword, 'mia does not index this attribute, so it cannot be matched on (it may be returned with includefield)');
  const column = a.column;
  const wildcard = /[*?]/.test(value);
  switch (a.vr) {
    case 'UI': {
      const uids = value.split(/[,\\]/).map((v) => v.trim());
      if (uids.some((u) => !UID.test(u) || u.length > 64)) throw bad(a.keyword, 'expected a UID or a comma-separated list of UIDs');
      if (uids.length > 1000) throw bad(a.keyword, 'at most 1000 UIDs');
      return uids.length === 1 ? { kind: 'equals', column, value: uids[0] ?? '', folded: false } : { kind: 'any-of', column, values: uids };
    }
    case 'DA':
      return rangeCondition(a, value, DATE, 'YYYYMMDD');
    case 'TM':
      return rangeCondition(a, value, TIME, 'HHMMSS');
    case 'IS':
    case 'US': {
      if (!/^-?\d{1,9}$/.test(value)) throw bad(a.keyword, 'expected an integer');
      return { kind: 'equals', column, value: Number(value), folded: false };
    }
    case 'PN': {
      if (fuzzy) {
        const words = searchWords(value.replace(/[*?]/g, ' '));
        return words.length === 0 ? null : { kind: 'words', column, words };
      }
      // Person names match without regard to case or accents (PS3.4 C.2.2.2.1 leaves PN case to
      // the implementation), as the worklist's search does.
      return wildcard ? { kind: 'wildcard', column, pattern: searchFold(value), folded: true } : { kind: 'equals', column, value: searchFold(value), folded: true };
    }
    default: {
      if (a.vr === 'CS' && /[,\\]/.test(value) && !wildcard) {
        return { kind: 'any-of', column, values: value.split(/[,\\]/).map((v) => v.trim()) };
      }
      return wildcard ? { kind: 'wildcard', column, pattern: value, folded: false } : { kind: 'equals', column, value, folded: false };
    }
  }
}

export type ParsedQido = {
  conditions: QidoCondition[];
  returned: QidoAttribute[];
  limit: number;
  offset: number;
  /** Set when the caller asked for more than QIDO_MAX_LIMIT. */
  capped: boolean;
  /** Set when the caller gave no limit: the server's maximum bounds the response. */
  unlimited: boolean;
};

/** Checks every parameter: an unknown attribute, a bad value or a misplaced level is 400 naming it. */
export function parseQido(query: QidoQuery, scope: QidoScope, fromLevel: QidoLevel): ParsedQido {
  const level = scope.level;
  const fuzzyRaw = single(query, 'fuzzymatching');
  if (fuzzyRaw !== undefined && fuzzyRaw !== 'true' && fuzzyRaw !== 'false') throw bad('fuzzymatching', 'expected true or false');
  const fuzzy = fuzzyRaw === 'true';
  const askedLimit = integerParam(query, 'limit', Number.MAX_SAFE_INTEGER);
  const offset = integerParam(query, 'offset', QIDO_MAX_OFFSET) ?? 0;
  const returned = new Map(defaultReturn(level, fromLevel).map((a) => [a.tag, a]));
  const conditions: QidoCondition[] = [];

  for (const field of valuesOf(query['includefield']).flatMap((v) => v.split(','))) {
    const name = field.trim();
    if (name === '') continue;
    if (name === 'all') {
      for (const a of QIDO_ATTRIBUTES) if (levelAllows(level, a.level)) returned.set(a.tag, a);
      continue;
    }
    const a = findAttribute(name);
    // A tag mia does not index, or one of a lower level (OHIF asks for Modality, 00080060, with
    // its study searches), cannot be returned and is left out, as PS3.18 8.3.4.3 allows; a word
    // that is no attribute mia knows is more likely a typo, and is named.
    if (!a) {
      if (/^(?:0x)?[0-9a-f]{8}$/i.test(name)) continue;
      throw bad('includefield', `unknown attribute ${name.slice(0, 64)}`);
    }
    if (levelAllows(level, a.level)) returned.set(a.tag, a);
  }

  for (const [name, raw] of Object.entries(query)) {
    if (RESERVED.has(name) || raw === undefined) continue;
    const a = findAttribute(name);
    if (!a) throw bad(name.slice(0, 64), 'unknown attribute (a keyword such as PatientName or a tag such as 00100010)');
    if (!levelAllows(level, a.level)) throw bad(a.keyword, `not an attribute of a ${level} result`);
    const values = valuesOf(raw);
    if (values.length > 1) throw bad(a.keyword, 'given more than once');
    const value = (values[0] ?? '').trim();
    if (value.length > 1024) throw bad(a.keyword, 'longer than 1024 characters');
    returned.set(a.tag, a);
    const condition = conditionFor(a, value, fuzzy);
    if (condition) conditions.push(condition);
  }
  if (scope.studyUid !== undefined) conditions.push({ kind: 'equals', column: 'study_uid', value: scope.studyUid, folded: false });
  if (scope.seriesUid !== undefined) conditions.push({ kind: 'equals', column: 'series_uid', value: scope.seriesUid, folded: false });

  const limit = Math.min(askedLimit ?? QIDO_MAX_LIMIT, QIDO_MAX_LIMIT);
  return { conditions, returned: [...returned.values()], limit, offset, capped: askedLimit !== undefined && askedLimit > QIDO_MAX_LIMIT, unlimited: askedLimit === undefined };
}

/** A PN value as DICOM JSON: its component groups (PS3.5 6.2: alphabetic=ideographic=phonetic). */
export function personName(value: string): Record<string, string> {
  const [alphabetic = '', ideographic, phonetic] = value.split('=');
  const out: Record<string, string> = {};
  if (alphabetic !== '') out['Alphabetic'] = alphabetic;
  if (ideographic) out['Ideographic'] = ideographic;
  if (phonetic) out['Phonetic'] = phonetic;
  return out;
}

function valueOf(a: QidoAttribute, row: QidoRow): unknown[] | null {
  const text = (v: string | null): unknown[] | null => (v === null || v === '' ? null : [v]);
  const num = (v: number | null): unknown[] | null => (v === null ? null : [v]);
  switch (a.keyword) {
    case 'StudyDate': return text(row.study_date);
    case 'StudyTime': return text(row.study_time);
    case 'AccessionNumber': return text(row.accession_number);
    case 'ModalitiesInStudy': return row.study_modalities ? row.study_modalities.split(',').sort() : null;
    case 'StudyDescription': return text(row.study_description);
    case 'PatientName': return row.patient_name ? [personName(row.patient_name)] : null;
    // mia files an empty Patient ID under UNKNOWN (imports/ingest.ts); it goes out as it came.
    case 'PatientID': return row.patient_id === 'UNKNOWN' ? null : text(row.patient_id);
    case 'PatientBirthDate': return text(row.patient_birth_date);
    case 'PatientSex': return text(row.patient_sex);
    case 'StudyInstanceUID': return text(row.study_uid);
    case 'NumberOfStudyRelatedSeries': return num(row.study_series);
    case 'NumberOfStudyRelatedInstances': return num(row.study_instances);
    case 'Modality': return text(row.modality);
    case 'SeriesDescription': return text(row.series_description);
    case 'BodyPartExamined': return text(row.body_part);
    case 'SeriesInstanceUID': return text(row.series_uid);
    case 'SeriesNumber': return num(row.series_number);
    case 'NumberOfSeriesRelatedInstances': return num(row.series_instances);
    case 'SOPClassUID': return text(row.sop_class_uid);
    case 'SOPInstanceUID': return text(row.sop_instance_uid);
    case 'AvailableTransferSyntaxUID': return text(row.transfer_syntax);
    case 'InstanceNumber': return num(row.instance_number);
    case 'NumberOfFrames': return num(row.frames);
    case 'Rows': return num(row.rows);
    case 'Columns': return num(row.columns);
    case 'BitsAllocated': return num(row.bits_allocated);
    default: return null;
  }
}

/** The WADO-RS address of a result (PS3.18 10.6.3.3.1 Retrieve URL). */
export function retrieveUrl(base: string, level: QidoLevel, row: QidoRow): string {
  const study = `${base}/studies/${row.study_uid}`;
  if (level === 'study') return study;
  const series = `${study}/series/${row.series_uid ?? ''}`;
  return level === 'series' ? series : `${series}/instances/${row.sop_instance_uid ?? ''}`;
}

/** Keys in tag order, as PS3.18 F.2.1 orders a DICOM JSON object's attributes. */
export function sortedByTag(object: DicomJson): DicomJson {
  return Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

type Emitter = { tag: string; emit(row: QidoRow): DicomJson[string] };

/**
 * What each result carries, in tag order (PS3.18 F.2.1), decided once per search: a page of a
 * thousand studies then builds its objects without sorting each one.
 */
function emitters(level: QidoLevel, returned: readonly QidoAttribute[], base: string): Emitter[] {
  const list: Emitter[] = returned.map((a) => ({
    tag: a.tag,
    emit: (row) => {
      const value = valueOf(a, row);
      return value === null ? { vr: a.vr } : { vr: a.vr, Value: value };
    },
  }));
  list.push({ tag: RETRIEVE_URL, emit: (row) => ({ vr: 'UR', Value: [retrieveUrl(base, level, row)] }) });
  list.push({ tag: INSTANCE_AVAILABILITY, emit: () => ({ vr: 'CS', Value: ['ONLINE'] }) });
  return list.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

function build(row: QidoRow, list: readonly Emitter[]): DicomJson {
  const out: DicomJson = {};
  for (const e of list) out[e.tag] = e.emit(row);
  return out;
}

export const QIDO_WARNING = 'The number of results exceeded the maximum supported by the server. Additional results can be requested.';

/** Runs a search. `base`: the absolute URL of the DICOMweb root, for Retrieve URLs. */
export async function searchQido(services: Services, query: QidoQuery, scope: QidoScope, fromLevel: QidoLevel, base: string): Promise<QidoResult> {
  const parsed = parseQido(query, scope, fromLevel);
  const { rows, more } = await searchIndex(services.db, scope.level, parsed.conditions, { offset: parsed.offset, limit: parsed.limit });
  const list = emitters(scope.level, parsed.returned, base);
  const items = rows.map((row) => build(row, list));
  const patientIds = [...new Set(rows.map((r) => r.patient_id))];
  // PS3.18 10.6.3.2: a response cut short by the server's maximum says so in a Warning header.
  // A limit of the caller's own that leaves more results is no cut of the server's: no Warning.
  const warning = parsed.capped || (parsed.unlimited && more) ? `299 mia "${QIDO_WARNING}"` : null;
  return { items, patientIds, warning };
}
