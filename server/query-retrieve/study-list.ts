/** A retrieve's studies as stored (JSON in retrieves.studies, written by this module's runner only). */
import type { RetrieveStudy } from '#server/api/query-retrieve-schemas.ts';

export function parseStudies(json: string): RetrieveStudy[] {
  const parsed: unknown = JSON.parse(json);
  return Array.isArray(parsed) ? (parsed as RetrieveStudy[]) : [];
}
