/**
 * What a pulled change waiting in the inbox waits for, as one text (sync_inbox.waits_for,
 * migration 34), and what arrives when a change goes in: a waiting change is tried again when
 * its key arrives (server/sync/client.ts), not at every round.
 */
export const waitKey = {
  /** An instance's file: fetched with its assigned study. */
  file: (sha256: string): string => `file:${sha256}`,
  /** A series: here once one of its instances is. */
  series: (seriesUid: string): string => `series:${seriesUid}`,
  analysis: (publicId: string): string => `analysis:${publicId}`,
  /** A model's finding comes with its analysis, a reader's as a change of its own. */
  finding: (publicId: string): string => `finding:${publicId}`,
  report: (publicId: string): string => `report:${publicId}`,
};
