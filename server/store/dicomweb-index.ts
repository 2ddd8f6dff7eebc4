/**
 * SQL for DICOMweb searches (QIDO-RS, PS3.18 10.6): studies, series and instances of the archive
 * index matched on their indexed attributes, with the counts a study or series result carries.
 * The matching rules (PS3.4 C.2.2.2) arrive already parsed as conditions on named columns; the
 * only SQL text here is this module's own, and every value is a bound parameter.
 */
import { allOf } from '#server/store/conditions.ts';
import { inJsonIds, jsonElements, type Database, type Dialect } from '#server/store/database.ts';
import { SEARCH_FOLD_FUNCTION } from '#server/store/search-fold.ts';

export type QidoLevel = 'study' | 'series' | 'instance';

/** The indexed attributes a search can match on; each names one SQL expression below. */
export type QidoColumn =
  | 'patient_name'
  | 'patient_id'
  | 'patient_birth_date'
  | 'patient_sex'
  | 'study_uid'
  | 'study_date'
  | 'study_time'
  | 'accession_number'
  | 'study_description'
  | 'series_uid'
  | 'modality'
  | 'series_number'
  | 'series_description'
  | 'body_part'
  | 'sop_instance_uid'
  | 'sop_class_uid'
  | 'instance_number';

/** Columns kept folded (searchFold) beside the value, for case- and accent-blind matching. */
const FOLDED_SQL: Readonly<Partial<Record<QidoColumn, string>>> = { patient_name: 'p.name_fold' };

const COLUMN_SQL: Readonly<Record<QidoColumn, string>> = {
  patient_name: 'p.name',
  patient_id: 'p.patient_id',
  patient_birth_date: 'p.birth_date',
  patient_sex: 'p.sex',
  study_uid: 'st.study_uid',
  study_date: 'st.study_date',
  study_time: 'st.study_time',
  accession_number: 'st.accession_number',
  study_description: 'st.description',
  series_uid: 's.scan_id',
  modality: 's.modality',
  series_number: 's.series_number',
  series_description: 's.description',
  body_part: 's.body_part',
  sop_instance_uid: 'i.sop_instance_uid',
  sop_class_uid: 'i.sop_class_uid',
  instance_number: 'i.instance_number',
};

/** The level whose table holds a column: a study search cannot match on a series column. */
export const COLUMN_LEVEL: Readonly<Record<QidoColumn, QidoLevel>> = {
  patient_name: 'study',
  patient_id: 'study',
  patient_birth_date: 'study',
  patient_sex: 'study',
  study_uid: 'study',
  study_date: 'study',
  study_time: 'study',
  accession_number: 'study',
  study_description: 'study',
  series_uid: 'series',
  modality: 'series',
  series_number: 'series',
  series_description: 'series',
  body_part: 'series',
  sop_instance_uid: 'instance',
  sop_class_uid: 'instance',
  instance_number: 'instance',
};

/**
 * One matching rule on one column. `wildcard` patterns use DICOM's * and ?; `folded` compares
 * both sides through the worklist's search fold (case and accents ignored, PN separators as
 * spaces); `words` is fuzzy matching: each word is the prefix of some component of the value.
 */
export type QidoCondition =
  | { kind: 'equals'; column: QidoColumn; value: string | number; folded: boolean }
  | { kind: 'wildcard'; column: QidoColumn; pattern: string; folded: boolean }
  | { kind: 'any-of'; column: QidoColumn; values: readonly string[] }
  | { kind: 'range'; column: QidoColumn; from: string | null; to: string | null }
  | { kind: 'words'; column: QidoColumn; words: readonly string[] }
  /** ModalitiesInStudy: the study has a series of one of these modalities. */
  | { kind: 'modality-in-study'; values: readonly string[] };

export type QidoRow = {
  id: number;
  study_uid: string;
  study_date: string | null;
  study_time: string | null;
  study_description: string | null;
  accession_number: string | null;
  patient_id: string;
  patient_name: string | null;
  patient_birth_date: string | null;
  patient_sex: string | null;
  /** Study level: series and instances of the study and their modalities (comma-separated). */
  study_series: number | null;
  study_instances: number | null;
  study_modalities: string | null;
  /** Series and instance levels. */
  series_uid: string | null;
  modality: string | null;
  series_number: number | null;
  series_description: string | null;
  body_part: string | null;
  series_instances: number | null;
  /** Instance level. */
  sop_instance_uid: string | null;
  sop_class_uid: string | null;
  instance_number: number | null;
  transfer_syntax: string | null;
  rows: number | null;
  columns: number | null;
  frames: number | null;
  bits_allocated: number | null;
};

function globPattern(pattern: string): string {
  // GLOB is case-sensitive, as DICOM matching is outside PN; '[' is its only other special.
  return pattern.replace(/\[/g, '[[]');
}

function likePattern(pattern: string): string {
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replace(/\*/g, '%').replace(/\?/g, '_');
}

function conditionSql(d: Dialect, c: QidoCondition, name: string, params: Record<string, unknown>): string {
  if (c.kind === 'modality-in-study') {
    params[name] = JSON.stringify(c.values);
    return `EXISTS (SELECT 1 FROM scans ms WHERE ms.study_ref = st.id AND ms.modality IN (SELECT value FROM ${jsonElements(d, `@${name}`)}))`;
  }
  const column = COLUMN_SQL[c.column];
  // The stored fold where there is one (migration 35): folding each row when asked calls a
  // function per row, on SQLite a JavaScript one.
  const folded = FOLDED_SQL[c.column] ?? `${SEARCH_FOLD_FUNCTION}(${column})`;
  switch (c.kind) {
    case 'equals':
      params[name] = c.value;
      return c.folded ? `${folded} = @${name}` : `${column} = @${name}`;
    case 'wildcard': {
      const target = c.folded ? folded : column;
      if (d === 'sqlite') {
        params[name] = globPattern(c.pattern);
        return `${target} GLOB @${name}`;
      }
      params[name] = likePattern(c.pattern);
      return `${target} LIKE @${name} ESCAPE '\\'`;
    }
    case 'any-of':
      params[name] = JSON.stringify(c.values);
      return `${column} IN (SELECT value FROM ${jsonElements(d, `@${name}`)})`;
    case 'range': {
      const parts: string[] = [`${column} IS NOT NULL`];
      if (c.from !== null) {
        params[`${name}_from`] = c.from;
        parts.push(`${column} >= @${name}_from`);
      }
      if (c.to !== null) {
        params[`${name}_to`] = c.to;
        parts.push(`${column} <= @${name}_to`);
      }
      return `(${parts.join(' AND ')})`;
    }
    case 'words': {
      const find = d === 'sqlite' ? 'instr' : 'strpos';
      return `(${c.words
        .map((word, i) => {
          params[`${name}_${i}`] = ` ${word}`;
          return `${find}(' ' || ${folded}, @${name}_${i}) > 0`;
        })
        .join(' AND ')})`;
    }
  }
}

const STUDY_FIELDS = `st.id AS study_id, st.study_uid, st.study_date, st.study_time, st.description AS study_description, st.accession_number,
  p.patient_id, p.name AS patient_name, p.birth_date AS patient_birth_date, p.sex AS patient_sex`;
const SERIES_FIELDS = `s.scan_id AS series_uid, s.modality, s.series_number, s.description AS series_description, s.body_part,
  s.instance_count AS series_instances`;
const INSTANCE_FIELDS = `i.sop_instance_uid, i.sop_class_uid, i.instance_number, i.transfer_syntax, i.rows, i.columns, i.frames, i.bits_allocated`;

/**
 * Series, instances and modalities of each study of a page, in one grouped query over the
 * scans_study index: per-row subqueries cost three index walks a row, which dominated a page of
 * a thousand studies.
 */
async function studyCounts(db: Database, studyIds: readonly number[]): Promise<Map<number, { series: number; instances: number; modalities: string | null }>> {
  const out = new Map<number, { series: number; instances: number; modalities: string | null }>();
  if (studyIds.length === 0) return out;
  const modalities = db.dialect === 'sqlite' ? 'group_concat(DISTINCT modality)' : `string_agg(DISTINCT modality, ',')`;
  const rows = await db.all<{ study_ref: number; series: number; instances: number; modalities: string | null }>(
    `SELECT study_ref, COUNT(*) AS series, COALESCE(SUM(instance_count), 0) AS instances, ${modalities} AS modalities
     FROM scans WHERE study_ref ${inJsonIds(db.dialect, '@ids')} GROUP BY study_ref`,
    { ids: JSON.stringify(studyIds) },
  );
  for (const r of rows) out.set(Number(r.study_ref), { series: Number(r.series), instances: Number(r.instances), modalities: r.modalities });
  return out;
}

/**
 * Instances in slice order within their series, when the search names its series or study: then
 * only their instances are sorted. A search over every instance of the archive is in the order
 * they were stored (the table's own order), still stable from page to page: sorting the whole
 * archive for each page took 190-290 ms for the first page of 600,000 instances (measured).
 */
const SLICE_ORDER = 's.id, i.position IS NULL, i.position, i.instance_number IS NULL, i.instance_number, i.id';

function scopedToSeriesOrStudy(conditions: readonly QidoCondition[]): boolean {
  return conditions.some((c) => (c.kind === 'equals' || c.kind === 'any-of') && (c.column === 'series_uid' || c.column === 'study_uid'));
}

function fromOf(level: QidoLevel, conditions: readonly QidoCondition[]): { select: string; from: string; order: string } {
  if (level === 'study') {
    return {
      select: STUDY_FIELDS,
      from: 'studies st JOIN patients p ON p.id = st.patient_ref',
      order: 'st.id',
    };
  }
  if (level === 'series') {
    return {
      select: `${STUDY_FIELDS}, ${SERIES_FIELDS}`,
      from: 'scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref',
      order: 's.id',
    };
  }
  return {
    select: `${STUDY_FIELDS}, ${SERIES_FIELDS}, ${INSTANCE_FIELDS}`,
    from: 'instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref',
    order: scopedToSeriesOrStudy(conditions) ? SLICE_ORDER : 'i.id',
  };
}

/** A column a level's select may leave out (undefined) or a row may hold NULL in. */
function text(value: unknown): string | null {
  return value === undefined || value === null ? null : String(value);
}

function numeric(value: unknown): number | null {
  return value === undefined || value === null ? null : Number(value);
}

/**
 * One page of matches at a level, in a stable order (studies and series as stored, instances in
 * slice order within their series). `limit + 1` rows are read so the caller knows if more exist.
 */
export async function searchIndex(
  db: Database,
  level: QidoLevel,
  conditions: readonly QidoCondition[],
  page: { offset: number; limit: number },
): Promise<{ rows: QidoRow[]; more: boolean }> {
  const params: Record<string, unknown> = { limit: page.limit + 1, offset: page.offset };
  // Built for this database's dialect alone: the parameters depend on it (GLOB or LIKE patterns).
  const d = db.dialect;
  const statement = (() => {
    const shape = fromOf(level, conditions);
    const where = allOf([
      // A study row without a series is one whose import failed midway: nothing to show.
      level === 'study' && 'EXISTS (SELECT 1 FROM scans es WHERE es.study_ref = st.id)',
      ...conditions.map((c, i) => conditionSql(d, c, `c${i}`, params)),
    ]);
    return `SELECT ${shape.select} FROM ${shape.from} WHERE ${where} ORDER BY ${shape.order} LIMIT @limit OFFSET @offset`;
  })();
  const found = await db.all<Record<string, unknown>>(statement, params);
  const counts = level === 'study' ? await studyCounts(db, found.slice(0, page.limit).map((r) => Number(r['study_id']))) : new Map<number, never>();
  const rows = found.slice(0, page.limit).map((r): QidoRow => {
    const c = counts.get(Number(r['study_id']));
    // Every field named once, in one order: one object shape for every row (spreading rows of
    // different levels into a template cost ~27 us a row in a CPU profile of QIDO searches).
    // pg returns COUNT and SUM as numbers (postgres.ts parses int8) but SUM of bigint is numeric.
    return {
      id: Number(r['study_id']),
      study_uid: String(r['study_uid']),
      study_date: text(r['study_date']),
      study_time: text(r['study_time']),
      study_description: text(r['study_description']),
      accession_number: text(r['accession_number']),
      patient_id: String(r['patient_id']),
      patient_name: text(r['patient_name']),
      patient_birth_date: text(r['patient_birth_date']),
      patient_sex: text(r['patient_sex']),
      study_series: c ? c.series : numeric(r['study_series']),
      study_instances: c ? c.instances : numeric(r['study_instances']),
      study_modalities: c ? c.modalities : text(r['study_modalities']),
      series_uid: text(r['series_uid']),
      modality: text(r['modality']),
      series_number: numeric(r['series_number']),
      series_description: text(r['series_description']),
      body_part: text(r['body_part']),
      series_instances: numeric(r['series_instances']),
      sop_instance_uid: text(r['sop_instance_uid']),
      sop_class_uid: text(r['sop_class_uid']),
      instance_number: numeric(r['instance_number']),
      transfer_syntax: text(r['transfer_syntax']),
      rows: numeric(r['rows']),
      columns: numeric(r['columns']),
      frames: numeric(r['frames']),
      bits_allocated: numeric(r['bits_allocated']),
    };
  });
  return { rows, more: found.length > page.limit };
}

export type RetrieveRow = {
  sop_instance_uid: string;
  series_uid: string;
  study_uid: string;
  patient_id: string;
  file_path: string;
  file_size: number;
  transfer_syntax: string;
  frames: number;
};

/** The stored files of a study, one of its series or one instance (WADO-RS), in slice order. */
export async function findRetrievable(
  db: Database,
  target: { studyUid: string; seriesUid?: string | undefined; sopInstanceUid?: string | undefined },
): Promise<RetrieveRow[]> {
  return await db.all<RetrieveRow>(
    `SELECT i.sop_instance_uid, s.scan_id AS series_uid, st.study_uid, p.patient_id, i.file_path, i.file_size, i.transfer_syntax, i.frames
     FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref
     WHERE ${allOf([
       'st.study_uid = @study',
       target.seriesUid !== undefined && 's.scan_id = @series',
       target.sopInstanceUid !== undefined && 'i.sop_instance_uid = @sop',
     ])}
     ORDER BY ${SLICE_ORDER}`,
    { study: target.studyUid, series: target.seriesUid ?? null, sop: target.sopInstanceUid ?? null },
  );
}

/** The study and series a stored instance belongs to, for the Retrieve URL of a STOW-RS answer. */
export async function findInstancePlace(db: Database, sopInstanceUid: string): Promise<{ study_uid: string; series_uid: string; sop_class_uid: string | null; patient_id: string } | undefined> {
  return await db.get(
    `SELECT st.study_uid, s.scan_id AS series_uid, i.sop_class_uid, p.patient_id
     FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref
     WHERE i.sop_instance_uid = ?`,
    [sopInstanceUid],
  );
}
