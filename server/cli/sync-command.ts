/**
 * `mia devices enroll|list|revoke|assign|assignments` (on the hub) and `mia sync join|now|status` (on a
 * workstation). The device key is read from a file or standard input, never from the command
 * line, where other users of the machine could see it in the process list.
 */
import { readFileSync } from 'node:fs';
import { formatTable } from '#server/cli/table.ts';
import { systemClock } from '#server/clock.ts';
import { MiaError } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { openDataFolder } from '#server/data-folder.ts';
import { readSyncStatus } from '#server/sync/agent.ts';
import { hello, syncOnce, SyncError, type SyncProgress } from '#server/sync/client.ts';
import { enrollDevice, listDeviceViews, revokeDeviceById } from '#server/sync/devices.ts';
import { assign, toAssignment } from '#server/sync/assignments.ts';
import { listAssignments } from '#server/store/assignments.ts';
import { openHubLink, writeHubLink } from '#server/sync/hub-link.ts';
import { listRefused, sendRefusedAgain } from '#server/sync/refused.ts';

export type SyncIo = {
  out(line: string): void;
  err(line: string): void;
  stderrIsTty: boolean;
  writeErr(text: string): void;
  readStdin(): string;
  /** Records what an admin did from the CLI in the audit log. */
  audit(db: Database, action: string, target: string | null): Promise<void>;
};
type Place = { dataDir: string; databaseUrl: string | null };

const usage = (message: string): never => {
  throw new MiaError('invalid', message);
};

async function withDb<T>(place: Place, work: (db: Database) => Promise<T>): Promise<T> {
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  try {
    return await work(folder.db);
  } finally {
    await folder.close();
  }
}

export async function devicesCommand(sub: string | undefined, args: readonly string[], place: Place, io: SyncIo): Promise<number> {
  const deps = (db: Database) => ({ db, clock: systemClock });
  switch (sub) {
    case 'enroll': {
      const name = args.join(' ').trim() || usage('devices enroll needs a NAME, e.g. mia devices enroll "CT reading room 2"');
      const { device, key } = await withDb(place, async (db) => await enrollDevice(deps(db), name, 'cli'));
      io.err(`enrolled device ${device.id} (${device.name}); key ${device.key_id}. On the workstation: mia sync join HUB_URL --key-file FILE (or the key on standard input). Store the key now: it is not shown again.`);
      io.out(key);
      return 0;
    }
    case 'list': {
      const rows = await withDb(place, async (db) => (await listDeviceViews(deps(db), { afterId: 0, limit: 100_000 })).items);
      io.out(formatTable(['ID', 'NAME', 'STATUS', 'LAST SEEN', 'LAG', 'CLOCK OFFSET', 'AUDIT GAPS', 'ENROLLED'], rows.map((d) => [d.id, d.name, d.status, d.last_seen_at ?? '-', String(d.lag), d.clock_offset_ms === null ? '-' : `${d.clock_offset_ms} ms`, String(d.audit_gap_events), d.created_at])));
      return 0;
    }
    case 'revoke': {
      const id = args[0] ?? usage('devices revoke needs a DEVICE_ID (see mia devices list)');
      const device = await withDb(place, async (db) => await revokeDeviceById(deps(db), id));
      io.out(`revoked ${device.id} (${device.name}) at ${device.revoked_at ?? ''}`);
      return 0;
    }
    case 'assign': {
      const [which, studyUid] = args;
      if (!which || !studyUid) return usage('devices assign needs a DEVICE (id or name) and a STUDY_UID, e.g. mia devices assign "reading room 2" 1.2.840...');
      const made = await withDb(place, async (db) => {
        const devices = (await listDeviceViews(deps(db), { afterId: 0, limit: 100_000 })).items;
        const device = devices.find((d) => d.id === which) ?? devices.find((d) => d.name === which && d.status === 'active');
        if (!device) return usage(`devices assign: no device ${which} (see mia devices list)`);
        return await assign(deps(db), { study_uid: studyUid, device_id: device.id }, 'cli');
      });
      io.out(`assigned study ${made.study_uid} to ${made.device_name} (${made.id}); it fetches the study at its next sync`);
      return 0;
    }
    case 'assignments': {
      const rows = await withDb(place, async (db) => (await listAssignments(db, { afterId: 0, limit: 100_000 })).items.map(toAssignment));
      io.out(formatTable(['ID', 'STUDY', 'DEVICE', 'READER', 'ASSIGNED'], rows.map((a) => [a.id, a.study_uid, a.device_name, a.reader_id ?? '-', a.created_at])));
      return 0;
    }
    default:
      return usage('devices: expected enroll, list, revoke, assign or assignments');
  }
}

function bar(p: SyncProgress): string {
  if (p.total === null || p.total === 0) return `${p.phase} ${p.done}`;
  const width = 30;
  const filled = Math.round((Math.min(p.done, p.total) / p.total) * width);
  return `${p.phase.padEnd(5)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${p.done}/${p.total}`;
}

export async function syncCommand(sub: string | undefined, args: readonly string[], options: { keyFile?: string | undefined; all?: boolean | undefined }, place: Place, io: SyncIo): Promise<number> {
  const { keyFile } = options;
  switch (sub) {
    case 'join': {
      const url = args[0] ?? usage('sync join needs the hub URL, e.g. mia sync join https://mia-hub.example.org');
      if (!/^https?:\/\//.test(url)) usage('sync join: the hub URL starts with https:// (or http:// on a trusted network)');
      const key = (keyFile ? readFileSync(keyFile, 'utf8') : io.readStdin()).trim();
      if (!key) usage('sync join: give the device key in --key-file FILE or on standard input');
      let who;
      try {
        who = await hello({ url, key });
      } catch (err) {
        if (err instanceof SyncError) usage(`sync join: ${err.message}`);
        throw err;
      }
      writeHubLink(place.dataDir, { url, key, device_id: who.device_id, device_name: who.device_name });
      io.out(`linked to ${url} as device ${who.device_id} (${who.device_name}); the server syncs in the background, or run mia sync now`);
      return 0;
    }
    case 'now': {
      const opened = openHubLink(place.dataDir);
      const link = opened.link ?? usage(opened.reason);
      const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
      try {
        let last = '';
        const report = await syncOnce({ db: folder.db, clock: systemClock, dataDir: place.dataDir, replica: folder.replica }, link, {
          onProgress: (p) => {
            if (!io.stderrIsTty) return;
            const line = bar(p);
            if (line !== last) io.writeErr(`\r${line}   `);
            last = line;
          },
        });
        if (io.stderrIsTty) io.writeErr('\n');
        io.out(`pushed ${report.pushed} change(s) and ${report.files} file(s) (${(report.fileBytes / 1e6).toFixed(1)} MB); refused ${report.refused}; waiting ${report.deferred}; pulled ${report.pulled}, applied ${report.applied}`);
        if (report.inbox > 0 || report.retried > 0) io.out(`${report.inbox} pulled change(s) waiting for files or records not here yet (studies not assigned here wait for good); ${report.retried} tried again this round`);
        if (report.auditEvents > 0) io.out(`sent ${report.auditEvents} audit event(s)`);
        if (report.filesFetched > 0) io.out(`fetched ${report.filesFetched} file(s) of assigned studies`);
        if (report.warning) io.err(`warning: ${report.warning}`);
        return report.refused > 0 ? 1 : 0;
      } catch (err) {
        if (err instanceof SyncError) {
          io.err(`mia: sync failed: ${err.message}; nothing acknowledged is lost, run it again`);
          return 1;
        }
        throw err;
      } finally {
        await folder.close();
      }
    }
    case 'status': {
      const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
      try {
        const s = await readSyncStatus({ db: folder.db, dataDir: place.dataDir, replica: folder.replica }, false);
        io.out(formatTable(['HUB', 'DEVICE', 'STATE', 'PENDING', 'REFUSED', 'LAST SYNC', 'LAST ERROR'], [[s.hub_url ?? '-', s.device_id ?? '-', s.state, String(s.pending), String(s.refused), s.last_sync_at ?? '-', s.last_error ?? '-']]));
        if (s.waiting_reason) io.out(`waiting: ${s.waiting_reason}`);
        return 0;
      } finally {
        await folder.close();
      }
    }
    case 'refused': {
      const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
      try {
        const rows = (await listRefused(folder, { afterId: 0, limit: 100_000 })).items;
        io.out(formatTable(['CHANGE', 'KIND', 'KEY', 'MADE', 'REFUSED BECAUSE'], rows.map((r) => [r.id, r.entity, r.key, r.made_at, r.reason])));
        return 0;
      } finally {
        await folder.close();
      }
    }
    case 'send-again': {
      if (options.all === (args.length > 0)) return usage('sync send-again needs CHANGE_ID... (see mia sync refused) or --all');
      const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
      try {
        let count = 0;
        for (const id of options.all ? [null] : args) {
          count += await sendRefusedAgain(folder, id);
          await io.audit(folder.db, 'sync.refused_send_again', `change:${id ?? 'all'}`);
        }
        io.out(`${count} refused change(s) will be sent again with the next sync (mia sync now)`);
        return 0;
      } catch (err) {
        if (err instanceof MiaError) usage(`sync send-again: ${err.message}`);
        throw err;
      } finally {
        await folder.close();
      }
    }
    default:
      return usage('sync: expected join, now, status, refused or send-again');
  }
}
