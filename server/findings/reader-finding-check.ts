/**
 * What a reader-drawn finding must be, wherever it is added (POST /v1/scans/{scan_id}/findings
 * while drafting, or an addendum to a final report): a glossary label and a box inside one frame
 * of an image of the scan.
 */
import { invalid } from '#server/errors.ts';
import type { ReaderFindingInput } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';
import { findInstance } from '#server/store/instances.ts';

export async function checkReaderFinding(db: Database, glossaryLabels: ReadonlySet<string>, scan: { id: number; scan_id: string }, input: ReaderFindingInput): Promise<void> {
  if (!glossaryLabels.has(input.label)) {
    throw invalid('Unknown label', `label ${input.label} is not in the glossary (GET /v1/labels): ${[...glossaryLabels].join(', ')}`);
  }
  const instance = await findInstance(db, input.instanceUid);
  if (!instance || instance.scan_ref !== scan.id) throw invalid('The image is not in this scan', `instance ${input.instanceUid} is not an image of scan ${scan.scan_id}`);
  if (input.frame >= Math.max(1, instance.frames)) throw invalid('No such frame', `instance ${input.instanceUid} has ${instance.frames} frame(s), numbered from 0`);
  if (input.x + input.width > instance.columns || input.y + input.height > instance.rows) {
    throw invalid('The box leaves the image', `the image is ${instance.columns} x ${instance.rows} pixels`);
  }
}
