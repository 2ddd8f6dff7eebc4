/** The DICOM admin panel's view of /v1/dicom/peers, /v1/dicom/routes and /v1/dicom/sends. */

export type DicomPeer = {
  id: string;
  name: string;
  kind: 'dimse' | 'dicomweb';
  ae_title: string | null;
  host: string | null;
  port: number | null;
  url: string | null;
  has_authorization: boolean;
  allow_incoming: boolean;
  created_by: string;
  created_at: string;
  updated_at: string;
};

export type RoutedEvent = 'analysis.finished' | 'report.finalized' | 'instance.received';

export type RuleConditions = { modalities?: string[]; model_id?: string; labels?: string[]; positive_only?: boolean };

export type RoutingRule = {
  id: string;
  name: string;
  enabled: boolean;
  event: RoutedEvent;
  object: 'analysis_sr' | 'report_sr' | 'instance';
  conditions: RuleConditions;
  peer_id: string;
  peer_name: string | null;
  method: 'c-store' | 'stow-rs' | null;
  created_at: string;
};

export type SendStatus = 'queued' | 'running' | 'sent' | 'failed' | 'gave_up';

export type SendJob = {
  id: string;
  rule_id: string | null;
  event: string;
  subject: string;
  object: 'analysis_sr' | 'report_sr' | 'instance';
  peer_id: string;
  method: 'c-store' | 'stow-rs';
  status: SendStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_error: string | null;
  sop_instance_uid: string | null;
  created_at: string;
  finished_at: string | null;
};
