/**
 * C-STORE of one routed object through mia's SCU (server/dimse/scu.ts), which sends files as
 * they are: the object is spooled to a private file in the data folder's upload spool (named for
 * this process, so a later start removes it if this one dies mid-send) and removed after.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dicomStore, DimseError } from '#server/dimse/scu.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { cStoreOutcome, type SendOutcome } from '#server/routing/send-outcome.ts';
import type { CStoreSender } from '#server/routing/send-worker.ts';

/** No answer from the peer for this long (connect, negotiate, each response) is a timeout. */
export const CSTORE_TIMEOUT_MS = 60_000;

/** Association-level failures: no connection, a rejection or abort, a silent peer, are worth
 * trying again (a peer being restarted, an AE title an admin is adding); a peer speaking garbage
 * or refusing the SOP class is not. */
function dimseFailure(err: DimseError, peer: string): SendOutcome {
  const transient = err.kind === 'connect' || err.kind === 'timeout' || err.kind === 'aborted' || err.kind === 'rejected';
  const error = `C-STORE to ${peer}: ${err.kind}${err.kind === 'rejected' ? ' (association rejected: does the peer know mia\'s AE title?)' : ''}`;
  return transient ? { kind: 'transient', error } : { kind: 'permanent', error };
}

export function dimseCStoreSender(spoolDir: string): CStoreSender {
  return async (destination, object) => {
    const dir = join(spoolDir, `${process.pid}-${randomBytes(8).toString('hex')}`);
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    try {
      const file = join(dir, 'object.dcm');
      await writeFile(file, object.bytes, { mode: PRIVATE_FILE_MODE });
      const peer = { host: destination.host, port: destination.port, calledAeTitle: destination.calledAeTitle, callingAeTitle: destination.callingAeTitle, timeoutMs: CSTORE_TIMEOUT_MS };
      let results;
      try {
        results = await dicomStore(peer, [file]);
      } catch (err) {
        if (err instanceof DimseError) return dimseFailure(err, destination.name);
        // The SCU's own protocol-level errors ("connection closed" when a peer hangs up on an
        // association it will not take): worth another attempt, and their words say what happened.
        if (err instanceof Error && !('code' in err)) return { kind: 'transient', error: `C-STORE to ${destination.name}: ${err.message.slice(0, 200)}` };
        throw err;
      }
      const result = results[0];
      if (!result) return { kind: 'transient', error: `C-STORE to ${destination.name}: no answer for the object` };
      if (result.outcome === 'stored') return cStoreOutcome(result.status);
      if (result.outcome === 'failed') {
        return result.status === null ? { kind: 'transient', error: `C-STORE to ${destination.name}: no status` } : prefixed(cStoreOutcome(result.status), destination.name);
      }
      return { kind: 'permanent', error: `C-STORE to ${destination.name}: not sent (the peer did not accept the SOP class in this transfer syntax)` };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
}

function prefixed(outcome: SendOutcome, peer: string): SendOutcome {
  return outcome.kind === 'sent' ? outcome : { ...outcome, error: `${outcome.error} from ${peer}` };
}
