/** The Search PACS screen's view of /v1/dicom/sources, /query, /retrieve and /retrieves. */

export type DicomSource = { id: string; name: string; kind: 'dimse' | 'dicomweb' };

export type QueryLevel = 'patient' | 'study' | 'series';

export type QueryFilters = {
  patient_name?: string;
  patient_id?: string;
  study_date_from?: string;
  study_date_to?: string;
  modality?: string;
  accession?: string;
  study_uid?: string;
};

export type PatientMatch = { level: 'patient'; patient_id: string; patient_name: string; birth_date: string; sex: string; studies: number | null };
export type StudyMatch = {
  level: 'study';
  study_uid: string;
  study_date: string;
  study_time: string;
  accession_number: string;
  description: string;
  modalities: string[];
  patient_id: string;
  patient_name: string;
  series_count: number | null;
  instance_count: number | null;
  in_archive: boolean;
};
export type SeriesMatch = { level: 'series'; study_uid: string; series_uid: string; modality: string; series_number: number | null; description: string; instance_count: number | null };
export type QueryMatch = PatientMatch | StudyMatch | SeriesMatch;

export type QueryResult = { source: DicomSource; level: QueryLevel; items: QueryMatch[]; capped: boolean; limit: number };

export type RetrieveStatus = 'running' | 'completed' | 'partial' | 'failed' | 'interrupted';

export type RetrieveStudy = {
  study_uid: string;
  series_uid: string | null;
  study_date: string;
  description: string;
  modalities: string[];
  expected_instances: number | null;
  status: 'pending' | 'running' | 'completed' | 'failed';
  completed: number;
  failed: number;
  warning: number;
  remaining: number | null;
  import_jobs: string[];
  error: string | null;
};

export type Retrieve = {
  id: string;
  source: { id: string; name: string };
  method: 'c-move' | 'wado-rs';
  target: { kind: 'study' | 'series' | 'priors'; study_uid: string | null; series_uid: string | null; patient_id: string | null; before: string | null; modalities: string[] | null };
  status: RetrieveStatus;
  error: string | null;
  studies: RetrieveStudy[];
  counts: { completed: number; failed: number; warning: number };
  created_by: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
};

export type RetrieveRequest = {
  peer: string;
  study_uid?: string;
  series_uid?: string;
  priors_of_patient_id?: string;
  before?: string;
  modalities?: string[];
};
