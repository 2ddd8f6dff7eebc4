/**
 * What the worklist compares between two looks at the recent import jobs (use-import-activity):
 * it changes whenever a job appears, imports more files or ends - also for a job that started
 * and finished entirely between two looks, because a new job id appears.
 */
import type { ImportJobSummary } from './api/types.ts';

export function importSignature(jobs: readonly ImportJobSummary[]): string {
  return jobs.map((job) => `${job.id}:${job.status}:${job.counts.imported}:${job.counts.files_seen}`).join('|');
}
