/**
 * The API contract of searching a PACS or DICOMweb server and retrieving from it (issue 14,
 * item 2): the filters a reader types, the results, and the retrieve record (zod; OpenAPI is
 * generated from it).
 */
import { z } from 'zod';
import { pageQuery } from '#server/api/schemas.ts';

const isoTime = z.string().describe('UTC time, ISO 8601');
const dicomUid = z.string().min(1).max(64).regex(/^[0-9]+(\.[0-9]+)*$/, 'expected a DICOM UID (digits and dots)');
const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'expected a date as YYYY-MM-DD')
  .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d), 'not a calendar date');
/**
 * Matching values go to the peer as DICOM matching keys (PS3.4 C.2.2.2): * and ? are wildcards;
 * a backslash would split the value into several (VM > 1) and control characters have no place.
 */
const matchText = (max: number) => z.string().trim().min(1).max(max).regex(/^[^\\\x00-\x1f\x7f]+$/, 'no backslash or control characters');
const modality = z.string().regex(/^[A-Z0-9]{1,16}$/, 'a modality code such as CT, MR, CR');

export const QUERY_LEVELS = ['patient', 'study', 'series'] as const;
export type QueryLevel = (typeof QUERY_LEVELS)[number];
export const DEFAULT_QUERY_LIMIT = 100;
export const MAX_QUERY_LIMIT = 1000;

export const queryFilters = z
  .object({
    patient_name: matchText(64).optional().describe('Patient\'s Name; * and ? are wildcards (DOE* matches DOE^JOHN)'),
    patient_id: matchText(64).optional().describe('Patient ID; * and ? are wildcards'),
    study_date_from: isoDate.optional().describe('Studies on or after this date (YYYY-MM-DD)'),
    study_date_to: isoDate.optional().describe('Studies on or before this date (YYYY-MM-DD)'),
    modality: modality.optional().describe('A modality in the study (study level) or of the series (series level)'),
    accession: matchText(16).optional().describe('Accession Number'),
    study_uid: dicomUid.optional().describe('Study Instance UID; required at series level'),
  })
  .strict();
export type QueryFilters = z.output<typeof queryFilters>;

export const queryBody = z
  .object({
    peer: z.string().min(1).max(64).describe('A DICOM peer by id (peer_...) or name, as listed by GET /v1/dicom/sources'),
    level: z.enum(QUERY_LEVELS).default('study'),
    filters: queryFilters.default({}),
    limit: z.number().int().min(1).max(MAX_QUERY_LIMIT).default(DEFAULT_QUERY_LIMIT).describe('At most this many results (1-1000, default 100); capped says more matched'),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (body.level === 'series' && body.filters.study_uid === undefined) {
      ctx.addIssue({ code: 'custom', path: ['filters', 'study_uid'], message: 'a series search names its study (study_uid)' });
    }
    if (body.level === 'patient') {
      for (const key of ['study_date_from', 'study_date_to', 'modality', 'accession', 'study_uid'] as const) {
        if (body.filters[key] !== undefined) ctx.addIssue({ code: 'custom', path: ['filters', key], message: 'a patient search matches patient_name and patient_id only' });
      }
    }
    const { study_date_from: from, study_date_to: to } = body.filters;
    if (from !== undefined && to !== undefined && from > to) ctx.addIssue({ code: 'custom', path: ['filters', 'study_date_to'], message: 'before study_date_from' });
  });
export type QueryBody = z.output<typeof queryBody>;

const source = z.object({ id: z.string(), name: z.string(), kind: z.enum(['dimse', 'dicomweb']) });
export const dicomSource = source.describe('A peer to search and retrieve from: no host, URL or credentials');

const patientResult = z.object({
  level: z.literal('patient'),
  patient_id: z.string(),
  patient_name: z.string().describe('DICOM PN as the peer sent it (FAMILY^Given)'),
  birth_date: z.string().describe('YYYYMMDD, or empty'),
  sex: z.string(),
  studies: z.number().int().nullable().describe('Number of the patient\'s studies, when the peer says'),
});
const studyResult = z.object({
  level: z.literal('study'),
  study_uid: z.string(),
  study_date: z.string().describe('YYYYMMDD, or empty'),
  study_time: z.string(),
  accession_number: z.string(),
  description: z.string(),
  modalities: z.array(z.string()),
  patient_id: z.string(),
  patient_name: z.string(),
  series_count: z.number().int().nullable(),
  instance_count: z.number().int().nullable(),
  in_archive: z.boolean().describe('mia already holds (part of) this study'),
});
const seriesResult = z.object({
  level: z.literal('series'),
  study_uid: z.string(),
  series_uid: z.string(),
  modality: z.string(),
  series_number: z.number().int().nullable(),
  description: z.string(),
  instance_count: z.number().int().nullable(),
});
export const queryResultItem = z.discriminatedUnion('level', [patientResult, studyResult, seriesResult]);
export type QueryResultItem = z.output<typeof queryResultItem>;

export const queryResult = z.object({
  source: dicomSource,
  level: z.enum(QUERY_LEVELS),
  items: z.array(queryResultItem),
  capped: z.boolean().describe('More matched than the limit: narrow the filters'),
  limit: z.number().int(),
});
export type QueryResult = z.output<typeof queryResult>;

export const MAX_PRIOR_STUDIES = 200;

export const retrieveBody = z
  .object({
    peer: z.string().min(1).max(64).describe('A DICOM peer by id (peer_...) or name'),
    study_uid: dicomUid.optional().describe('The study to retrieve (or the study of series_uid)'),
    series_uid: dicomUid.optional().describe('One series of study_uid'),
    priors_of_patient_id: matchText(64)
      .refine((id) => !/[*?]/.test(id), 'a Patient ID, without wildcards')
      .optional()
      .describe('Every study of this Patient ID on the peer'),
    before: isoDate.optional().describe('Priors only: studies dated before this day (YYYY-MM-DD)'),
    modalities: z.array(modality).min(1).max(16).optional().describe('Priors only: studies with one of these modalities'),
  })
  .strict()
  .superRefine((body, ctx) => {
    const targets = [body.study_uid !== undefined || body.series_uid !== undefined, body.priors_of_patient_id !== undefined].filter(Boolean).length;
    if (targets !== 1) ctx.addIssue({ code: 'custom', path: ['study_uid'], message: 'name one of study_uid (with series_uid for one series) or priors_of_patient_id' });
    if (body.series_uid !== undefined && body.study_uid === undefined) {
      ctx.addIssue({ code: 'custom', path: ['study_uid'], message: 'a series retrieve names its study too (C-MOVE and WADO-RS address a series within its study)' });
    }
    if (body.priors_of_patient_id === undefined) {
      for (const key of ['before', 'modalities'] as const) if (body[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'applies to priors_of_patient_id only' });
    }
  });
export type RetrieveBody = z.output<typeof retrieveBody>;

export const RETRIEVE_STATUSES = ['running', 'completed', 'partial', 'failed', 'interrupted'] as const;
export const RETRIEVE_STUDY_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;

export const retrieveStudy = z.object({
  study_uid: z.string(),
  series_uid: z.string().nullable(),
  study_date: z.string(),
  description: z.string(),
  modalities: z.array(z.string()),
  expected_instances: z.number().int().nullable().describe('What the peer said the study (or series) holds'),
  status: z.enum(RETRIEVE_STUDY_STATUSES),
  completed: z.number().int().describe('Sub-operations (instances) that arrived'),
  failed: z.number().int(),
  warning: z.number().int(),
  remaining: z.number().int().nullable(),
  import_jobs: z.array(z.string()).describe('The import jobs (GET /v1/imports/{id}) its instances went into'),
  error: z.string().nullable(),
});
export type RetrieveStudy = z.output<typeof retrieveStudy>;

export const retrieveRecord = z.object({
  id: z.string(),
  source: z.object({ id: z.string(), name: z.string() }),
  method: z.enum(['c-move', 'wado-rs']),
  target: z.object({
    kind: z.enum(['study', 'series', 'priors']),
    study_uid: z.string().nullable(),
    series_uid: z.string().nullable(),
    patient_id: z.string().nullable(),
    before: z.string().nullable(),
    modalities: z.array(z.string()).nullable(),
  }),
  status: z
    .enum(RETRIEVE_STATUSES)
    .describe('partial: some studies or instances failed; interrupted: mia stopped before it finished (retrieve again)'),
  error: z.string().nullable(),
  studies: z.array(retrieveStudy),
  counts: z.object({ completed: z.number().int(), failed: z.number().int(), warning: z.number().int() }),
  created_by: z.string(),
  created_at: isoTime,
  updated_at: isoTime,
  finished_at: isoTime.nullable(),
});
export type RetrieveRecord = z.output<typeof retrieveRecord>;

export const retrievesQuery = pageQuery.extend({ status: z.enum(RETRIEVE_STATUSES).optional() }).strict();
export const retrieveParams = z.object({ id: z.string().regex(/^rtv_[0-9a-f]{24}$/, 'a rtv_ id') });
