/**
 * The `mia` command line. Every command takes --data DIR and works directly on that folder's
 * database, which is safe while a server runs on it (WAL, busy timeout). The operator at the
 * terminal owns the data folder, so commands act with full rights and are audited as "cli".
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolve as resolvePath } from 'node:path';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { GRANTABLE_SCOPES, ROLES } from '#common/vocabulary.ts';
import { emailAddress } from '#server/api/schemas.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { issueKeyForUser, listKeys, revokeKey, rotateKey } from '#server/auth/api-keys.ts';
import { recordAudit } from '#server/audit/audit.ts';
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import type { SyncIo } from '#server/cli/sync-command.ts';
import { defaultDataDir } from '#server/cli/data-dir.ts';
import { isValidAeTitle } from '#server/dimse/pdu.ts';
import { parseAllowedCaller, type DicomConfigInput } from '#server/dimse/scp-config.ts';
import { DEFAULT_AUDIT_RETENTION_DAYS, DEFAULT_RATE_LIMIT, DEFAULT_SYNC_INTERVAL_MS } from '#server/config.ts';
import { MiaError } from '#server/errors.ts';
import { storageErrorOf } from '#server/storage-errors.ts';
import { openDataFolder } from '#server/data-folder.ts';
import type { Database } from '#server/store/database.ts';
import { findOrCreateUser, listUsers } from '#server/users/users.ts';

const USAGE = `Usage: mia <command> [options]   (every command takes --data DIR, and
                 --database postgres://... (or $MIA_DATABASE_URL) on a hub)

  serve [--port N] [--host 127.0.0.1] [--allowed-host NAME] [--hub] [--ui DIR]
        [--trusted-proxy ADDRESS]
        [--watch DIR [--watch-stable SECONDS]] [--analyze-after-import]
        [--audit-retention-days N] [--rate-limit N] [--log-dir DIR]
        [--sync-interval SECONDS] [--export-workers N]
        [--dicom-port N [--ae-title AE] [--dicom-host ADDRESS]
         [--dicom-allow AE@HOST,...]]
                               run the API and the browser UI (renderer/dist, or
                               --ui DIR) at /; prints the URL it listens on;
                               --watch imports files that appear in DIR once
                               unchanged for SECONDS (default 3);
                               --analyze-after-import queues new scans for
                               analysis once their import has finished;
                               audit events older than N days (default 90)
                               move to audit-archive/ in the data folder,
                               still listed by GET /v1/audit;
                               --trusted-proxy: a reverse proxy whose
                               X-Forwarded-For names the client (throttling,
                               audit); repeat for several
                               --rate-limit: requests per minute per key
                               (default 30000; shared by a hub's nodes);
                               --log-dir: where mia.log goes (default
                               DATA/logs; a hub node's own local folder)
                               --sync-interval: a linked workstation syncs
                               this often (default 10; 0: only on demand)
                               --dicom-port: receive C-ECHO and C-STORE as
                               AE title --ae-title (default MIA) on all
                               addresses (or --dicom-host) from the calling
                               AEs listed by --dicom-allow (HOST: an IP
                               address, localhost or *); received images are
                               imported like files
  keys create --role ROLE --email EMAIL [--scopes a,b] [--name TEXT] [--replace]
                               create the user if needed and a key for them;
                               the key is printed alone on the last line;
                               --replace revokes the user's other live keys
                               with the same --name (a key issued per session)
  keys list                    list keys (never the keys themselves)
  keys rotate KEY_ID           new key now; the old one works 24 more hours
  keys revoke KEY_ID           the key stops working immediately
  users list                   list users
  import PATH...               import DICOM files, folders and discs (DICOMDIR) into
                               the archive; exit 1 if any file was rejected
  devices enroll NAME          (hub) enroll a workstation; its device key is
                               printed alone on the last line, once
  devices list                 (hub) enrolled workstations: last seen, lag
  devices revoke DEVICE_ID     (hub) its key is refused at once
  devices assign DEVICE STUDY_UID
                               (hub) give a study to a workstation (id or name):
                               it fetches the study's files to read it offline
  devices assignments          (hub) the studies given to workstations
  sync join HUB_URL [--key-file FILE]
                               link this workstation to its hub with the key
                               from enroll (from FILE or standard input)
  sync now                     push this workstation's work and pull others',
                               with a progress bar; exit 1 if the hub refused
                               a change (mia sync status says why)
  sync status                  hub, state, pending changes, last sync, error
  sync refused                 this workstation's changes the hub refused, why
  sync send-again (CHANGE_ID... | --all)
                               send refused changes again with the next sync
                               (once the cause is mended: a file restored)
  analyze (--all | SCAN_ID...) [--model ID]
                               analyse scans with the selected (or named) model,
                               in this process; --all takes every scan not yet
                               analysed or failed; resumes interrupted jobs;
                               exit 1 if any analysis failed

  dicom echo|send|find|move --host H --port P --aec AE [--aet MIA]
                               talk to a DICOM node (PACS, modality):
                               echo: C-ECHO; send PATH...: C-STORE files and
                               folders as they are; find [--level PATIENT|
                               STUDY|SERIES] [--patient-id ID] [--patient-name
                               NAME] [--study-uid UID] [--accession N]
                               [--study-date YYYYMMDD[-YYYYMMDD]] [--modality M]
                               prints the matches; move (--study UID [--series
                               UID] | --patient ID) --dest AE: C-MOVE to AE
                               (mia's own with its --ae-title); exit 1 if a
                               file or sub-operation failed
  dicom find|move --peer NAME ...
                               the same against a DICOM peer of the data folder
  dicom retrieve --peer NAME (--study UID [--series UID] | --priors PATIENT_ID
        [--before YYYY-MM-DD] [--modality CT,MR]) [--dest AE]
                               retrieve into the archive as the Search PACS
                               screen does: C-MOVE to AE --dest (default MIA,
                               the --ae-title of mia serve --dicom-port, which
                               imports what arrives) or WADO-RS from a DICOMweb
                               peer; prints each study's outcome; exit 1 unless
                               everything arrived
  dicom peers list | remove PEER
  dicom peers add --name N (--ae-title AE --host H --port P [--allow-incoming]
        | --url URL [--authorization VALUE])
                               the DICOM nodes and DICOMweb servers mia talks to
                               (--allow-incoming: the node may call mia's SCP)
  dicomweb find|pull (--url URL [--header 'Name: value'] | --peer NAME)
                               a DICOMweb server (its root, e.g. .../dicom-web):
                               find [--patient-id ID] [--patient-name NAME]
                               [--study-uid UID] [--accession N] [--study-date
                               YYYYMMDD[-YYYYMMDD]] [--modality M] lists
                               studies (--study UID: its series); pull --study
                               UID [--series UID] retrieves into this archive;
                               exit 1 if an instance was refused
  models import-monai BUNDLE_DIR [--out DIR] [--id ID]
                               a MONAI Bundle (configs/metadata.json, its
                               inference.json intensity transform and
                               models/model.onnx) as a mia slice classifier in
                               DATA/models/ID (or DIR); prints what to review
  sr analysis ANALYSIS_ID --out FILE
                               a finished analysis as a DICOM SR (TID 1500
                               Measurement Report), as GET /v1/analyses/{id}/sr
  sr report REPORT_ID --out FILE
                               a signed report as a DICOM Basic Text SR, as
                               GET /v1/reports/{id}/sr
  routes add NAME --event analysis.finished|report.finalized|instance.received
        --peer PEER
        [--modality CT,MR] [--labels L1,L2] [--model ID] [--positive-only]
        [--object analysis_sr|report_sr] [--disabled]
                               a routing rule: when the event happens and the
                               conditions hold, send the SR (or forward the
                               received image) to the DICOM peer
                               (by C-STORE to a node, STOW-RS to a DICOMweb
                               server; peers: GET/POST /v1/dicom/peers)
  routes list                  the rules
  routes enable|disable|remove RULE
                               by id or name; removing keeps its jobs listed
  routes jobs [--status queued|running|sent|failed|gave_up]
                               send jobs: status, attempts, next attempt, error
  routes retry SEND_ID         try a failed or given-up job again now
  routes send                  send the jobs due now in this process (a running
                               server sends them by itself)

Default data folder: ${defaultDataDir()} (or $MIA_DATA)`;

const OPTIONS = {
  data: { type: 'string' },
  database: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  'allowed-host': { type: 'string', multiple: true },
  'trusted-proxy': { type: 'string', multiple: true },
  hub: { type: 'boolean' },
  watch: { type: 'string' },
  'watch-stable': { type: 'string' },
  ui: { type: 'string' },
  role: { type: 'string' },
  email: { type: 'string' },
  scopes: { type: 'string' },
  name: { type: 'string' },
  replace: { type: 'boolean' },
  all: { type: 'boolean' },
  'analyze-after-import': { type: 'boolean' },
  'audit-retention-days': { type: 'string' },
  'export-workers': { type: 'string' },
  'rate-limit': { type: 'string' },
  'log-dir': { type: 'string' },
  'key-file': { type: 'string' },
  'sync-interval': { type: 'string' },
  'dicom-port': { type: 'string' },
  'dicom-host': { type: 'string' },
  'ae-title': { type: 'string' },
  'dicom-allow': { type: 'string', multiple: true },
  aec: { type: 'string' },
  aet: { type: 'string' },
  level: { type: 'string' },
  'patient-id': { type: 'string' },
  'patient-name': { type: 'string' },
  'study-uid': { type: 'string' },
  accession: { type: 'string' },
  'study-date': { type: 'string' },
  modality: { type: 'string' },
  study: { type: 'string' },
  series: { type: 'string' },
  patient: { type: 'string' },
  dest: { type: 'string' },
  url: { type: 'string' },
  header: { type: 'string', multiple: true },
  peer: { type: 'string' },
  priors: { type: 'string' },
  before: { type: 'string' },
  authorization: { type: 'string' },
  'allow-incoming': { type: 'boolean' },
  model: { type: 'string' },
  out: { type: 'string' },
  id: { type: 'string' },
  event: { type: 'string' },
  labels: { type: 'string' },
  'positive-only': { type: 'boolean' },
  object: { type: 'string' },
  disabled: { type: 'boolean' },
  status: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Out = { out(line: string): void; err(line: string): void };
const stdio: Out = {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
};

function syncIo(io: Out): SyncIo {
  return {
    ...io,
    stderrIsTty: process.stderr.isTTY === true,
    writeErr: (text) => process.stderr.write(text),
    readStdin: () => (process.stdin.isTTY ? '' : readFileSync(0, 'utf8')),
    audit,
  };
}

/** The operator at the terminal: full rights, audited as the CLI. */
const CLI_CALLER: AuthContext = {
  keyRef: 0,
  keyId: 'cli',
  userRef: 0,
  userId: 'cli',
  email: 'cli',
  role: 'admin',
  scopes: ['*'],
  keyRotated: false,
  device: null,
};

async function audit(db: Database, action: string, target: string | null): Promise<void> {
  await recordAudit(db, {
    at: systemClock.now().toISOString(),
    request_id: null,
    key_id: 'cli',
    user_id: 'cli',
    action,
    target,
    patient_id: null,
    outcome: 'success',
    status_code: null,
  });
}

/** Where a command works: the data folder, and the hub's PostgreSQL when one is named. */
type Place = { dataDir: string; databaseUrl: string | null };

async function withDatabase<T>(place: Place, work: (db: Database) => Promise<T>): Promise<T> {
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  try {
    return await work(folder.db);
  } finally {
    await folder.close();
  }
}

function fail(message: string): never {
  throw new MiaError('invalid', message);
}

/** A numeric option, or a usage error naming it. */
function numberOption(values: Record<string, unknown>, name: string, fallback: string, schema: z.ZodNumber): number {
  const parsed = z.coerce.number().pipe(schema).safeParse(values[name] ?? fallback);
  if (!parsed.success) fail(`--${name} ${String(values[name])}: ${parsed.error.issues[0]?.message ?? 'not a valid number'}`);
  return parsed.data;
}

async function serve(values: Record<string, unknown>, { dataDir, databaseUrl }: Place, io: Out): Promise<number> {
  const port = numberOption(values, 'port', '0', z.number().int().min(0).max(65535));
  const host = typeof values['host'] === 'string' ? values['host'] : '127.0.0.1';
  const hubMode = values['hub'] === true;
  if (!hubMode && !['127.0.0.1', 'localhost', '::1'].includes(host)) {
    fail(`--host ${host} exposes the API beyond this machine; add --hub for an on-premise hub install`);
  }
  const allowedHosts = (values['allowed-host'] as string[] | undefined) ?? [];
  const trustedProxies = (values['trusted-proxy'] as string[] | undefined) ?? [];
  if (trustedProxies.some((address) => isIP(address) === 0)) fail('--trusted-proxy: expected an IP address');
  // The built renderer beside this package, when it was built (npm run build:renderer).
  const builtUi = fileURLToPath(new URL('../../renderer/dist', import.meta.url));
  const uiDir = typeof values['ui'] === 'string' ? values['ui'] : existsSync(builtUi) ? builtUi : null;
  const watchDir = typeof values['watch'] === 'string' ? resolvePath(values['watch']) : null;
  const watchStableMs = numberOption(values, 'watch-stable', '3', z.number().min(0).max(3600)) * 1000;
  const analyzeAfterImport = values['analyze-after-import'] === true;
  const auditRetentionDays = numberOption(values, 'audit-retention-days', String(DEFAULT_AUDIT_RETENTION_DAYS), z.number().int().min(1).max(36_500));
  const requests = numberOption(values, 'rate-limit', String(DEFAULT_RATE_LIMIT.requests), z.number().int().min(1).max(100_000_000));
  const rateLimit = { ...DEFAULT_RATE_LIMIT, requests };
  const logDir = typeof values['log-dir'] === 'string' ? resolvePath(values['log-dir']) : null;
  const syncIntervalMs = numberOption(values, 'sync-interval', String(DEFAULT_SYNC_INTERVAL_MS / 1000), z.number().min(0).max(86_400)) * 1000;
  const exportWorkers = values['export-workers'] === undefined ? undefined : numberOption(values, 'export-workers', '0', z.number().int().min(0).max(16));
  const dicom = dicomServeOptions(values);
  const { createServer } = await import('#server/create-server.ts');
  const server = await createServer({ dataDir, databaseUrl, rateLimit, logDir, hubMode, allowedHosts, trustedProxies, logToStderr: false, uiDir, watchDir, watchStableMs, analyzeAfterImport, auditRetentionDays, syncIntervalMs, exportWorkers, dicom });
  let url: string;
  try {
    url = await server.listen(port, host);
  } catch (error) {
    await server.close();
    const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
    if (code === 'EADDRINUSE') fail(`port ${port} on ${host} is already in use; pick another with --port`);
    if (code === 'EADDRNOTAVAIL') fail(`${host} is not an address of this machine`);
    if (code === 'EACCES') fail(`no permission to listen on port ${port}; use a port above 1023`);
    throw error;
  }
  io.out(`mia API listening on ${url} (data: ${dataDir})`);
  const listener = server.runtime.dicomListener();
  if (listener) io.out(`mia DICOM listening on port ${listener.port} as ${listener.aeTitle}`);
  io.out(uiDir ? `workstation UI: ${url}/ (sign in with an API key)` : 'workstation UI not built: run npm run build:renderer');
  await new Promise<void>((resolve) => {
    const stop = (): void => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  io.err('stopping: finishing in-flight requests');
  await server.close();
  return 0;
}

/** The DICOM listener's options of `mia serve`; null without --dicom-port. */
function dicomServeOptions(values: Record<string, unknown>): DicomConfigInput | null {
  if (values['dicom-port'] === undefined) {
    if (values['ae-title'] !== undefined || values['dicom-allow'] !== undefined) fail('--ae-title and --dicom-allow need --dicom-port');
    return null;
  }
  const port = numberOption(values, 'dicom-port', '0', z.number().int().min(0).max(65535));
  const aeTitle = typeof values['ae-title'] === 'string' ? values['ae-title'] : 'MIA';
  if (!isValidAeTitle(aeTitle)) fail(`--ae-title ${aeTitle}: an AE title is 1-16 printable characters, no backslash`);
  const entries = ((values['dicom-allow'] as string[] | undefined) ?? []).flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
  const allow = entries.map((entry) => {
    const parsed = parseAllowedCaller(entry);
    return 'error' in parsed ? fail(`--dicom-allow ${parsed.error}`) : parsed;
  });
  const host = typeof values['dicom-host'] === 'string' ? values['dicom-host'] : '0.0.0.0';
  return { port, aeTitle, allow, host };
}

async function keysCommand(sub: string | undefined, args: string[], values: Record<string, unknown>, place: Place, io: Out): Promise<number> {
  const deps = (db: Database) => ({ db, clock: systemClock });
  switch (sub) {
    case 'create': {
      const role = z.enum(ROLES).safeParse(values['role']);
      if (!role.success) fail(`--role must be one of ${ROLES.join(', ')}`);
      const email = emailAddress.safeParse(values['email']);
      if (!email.success) fail('--email must be an email address');
      const scopeList = typeof values['scopes'] === 'string' ? values['scopes'].split(',').map((s) => s.trim()).filter(Boolean) : [];
      const scopes = z.array(z.enum(GRANTABLE_SCOPES)).safeParse(scopeList);
      if (!scopes.success) fail(`--scopes: each must be one of ${GRANTABLE_SCOPES.join(', ')}`);
      const name = typeof values['name'] === 'string' ? values['name'] : null;
      if (values['replace'] === true && name === null) fail('--replace needs --name: it revokes the keys with that name');
      const { key, id, created, userId, replaced } = await withDatabase(place, async (db) => {
        const { user, created } = await findOrCreateUser(deps(db), { email: email.data, role: role.data });
        const replaced: string[] = [];
        if (values['replace'] === true) {
          const own = (await listKeys(deps(db), CLI_CALLER, { userId: user.public_id }, { afterId: 0, limit: 100_000 })).items;
          for (const old of own.filter((k) => k.name === name && (k.status === 'active' || k.status === 'expiring'))) {
            await revokeKey(deps(db), CLI_CALLER, old.id);
            await audit(db, 'keys.revoke', `key:${old.id}`);
            replaced.push(old.id);
          }
        }
        const issued = await issueKeyForUser(deps(db), { userRef: user.id, name, extraScopes: scopes.data });
        await audit(db, 'keys.create', `key:${issued.row.public_id}`);
        return { key: issued.key, id: issued.row.public_id, created, userId: user.public_id, replaced };
      });
      if (replaced.length > 0) io.err(`revoked ${replaced.length} earlier key(s) named "${name ?? ''}": ${replaced.join(', ')}`);
      io.err(`${created ? 'created user' : 'user'} ${userId} (${email.data}, ${role.data}); key ${id}. Store the key now: it is not shown again.`);
      io.out(key);
      return 0;
    }
    case 'list': {
      const rows = await withDatabase(place, async (db) => (await listKeys(deps(db), CLI_CALLER, {}, { afterId: 0, limit: 100_000 })).items);
      io.out(
        formatTable(
          ['ID', 'USER', 'PREFIX', 'STATUS', 'SCOPES', 'CREATED', 'LAST USED', 'EXPIRES'],
          rows.map((k) => [k.id, k.user_id, k.prefix + '…', k.status, k.scopes.join(','), k.created_at, k.last_used_at ?? '-', k.expires_at ?? '-']),
        ),
      );
      return 0;
    }
    case 'rotate': {
      const keyId = args[0] ?? fail('keys rotate needs a KEY_ID (see mia keys list)');
      const rotated = await withDatabase(place, async (db) => {
        const result = await rotateKey(deps(db), CLI_CALLER, keyId);
        await audit(db, 'keys.rotate', `key:${keyId}`);
        return result;
      });
      io.err(`new key ${rotated.apiKey.id}; old key ${rotated.previous.id} works until ${rotated.previous.expiresAt}. Store the key now.`);
      io.out(rotated.key);
      return 0;
    }
    case 'revoke': {
      const keyId = args[0] ?? fail('keys revoke needs a KEY_ID (see mia keys list)');
      const revoked = await withDatabase(place, async (db) => {
        const result = await revokeKey(deps(db), CLI_CALLER, keyId);
        await audit(db, 'keys.revoke', `key:${keyId}`);
        return result;
      });
      io.out(`revoked ${revoked.id} at ${revoked.revoked_at ?? ''}`);
      return 0;
    }
    default:
      return fail('keys: expected create, list, rotate or revoke');
  }
}

/**
 * Each command's module is loaded when that command runs: loading all of them at start (the HTTP
 * server, PACS clients, analysis) cost `mia import` 0.4-0.6 s before its first file through tsx.
 * Compiled (bin/compiled-cli.mjs), these imports are the chunk boundaries, so the same holds.
 */
export async function main(argv: string[], io: Out = stdio): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    io.err(`mia: ${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, sub, ...rest] = positionals;
  if (values.help || !command) {
    io.out(USAGE);
    return command || values.help ? 0 : 2;
  }
  const dataDir = values.data ?? defaultDataDir();
  // A hub's nodes share one PostgreSQL; every command then works on it as on the SQLite folder.
  const databaseUrl = values.database ?? process.env['MIA_DATABASE_URL'] ?? null;
  if (databaseUrl !== null && !/^postgres(ql)?:\/\//.test(databaseUrl)) fail('--database: expected a postgres:// URL');
  const place: Place = { dataDir, databaseUrl };
  try {
    switch (command) {
      case 'serve':
        return await serve(values, place, io);
      case 'keys':
        return await keysCommand(sub, rest, values, place, io);
      case 'users': {
        if (sub !== 'list') fail('users: expected list');
        const users = await withDatabase(place, async (db) => (await listUsers({ db, clock: systemClock }, {}, { afterId: 0, limit: 100_000 })).items);
        io.out(formatTable(['ID', 'EMAIL', 'ROLE', 'STATUS', 'CREATED'], users.map((u) => [u.public_id, u.email, u.role, u.status, u.created_at])));
        return 0;
      }
      case 'devices':
        return await (await import('#server/cli/sync-command.ts')).devicesCommand(sub, rest, place, syncIo(io));
      case 'sync':
        return await (await import('#server/cli/sync-command.ts')).syncCommand(sub, rest, { keyFile: values['key-file'], all: values['all'] }, place, syncIo(io));
      case 'import':
        return await (await import('#server/cli/import-command.ts')).importCommand([sub, ...rest].filter((p): p is string => p !== undefined), place, {
          ...io,
          stderrIsTty: process.stderr.isTTY === true,
          writeErr: (text) => process.stderr.write(text),
        });
      case 'dicom': {
        const { dimsePeerOf, pacsCommand } = await import('#server/cli/pacs-command.ts');
        if (sub === 'retrieve' || sub === 'peers') return await pacsCommand(sub, rest, values, place, io);
        const { dicomCommand } = await import('#server/cli/dicom-command.ts');
        return await dicomCommand(sub, rest, values, io, (ref, callingAeTitle) => dimsePeerOf(place, ref, callingAeTitle));
      }
      case 'dicomweb':
        return await (await import('#server/cli/dicomweb-command.ts')).dicomwebCommand(sub, values, place, io);
      case 'sr':
        return await (await import('#server/cli/sr-command.ts')).srCommand(sub, rest, values.out, place, io);
      case 'routes':
        return await (await import('#server/cli/routes-command.ts')).routesCommand(
          sub,
          rest,
          { event: values.event, peer: values.peer, modality: values.modality, labels: values.labels, model: values.model, object: values.object, positiveOnly: values['positive-only'], disabled: values.disabled, status: values.status },
          place,
          io,
        );
      case 'analyze':
        return await (await import('#server/cli/analyze-command.ts')).analyzeCommand(
          dataDir,
          { all: values.all === true, scanIds: [sub, ...rest].filter((p): p is string => p !== undefined), modelId: values.model, config: { databaseUrl } },
          { ...io, stderrIsTty: process.stderr.isTTY === true, writeErr: (text) => process.stderr.write(text) },
        );
      case 'models':
        return await (await import('#server/cli/models-command.ts')).modelsCommand(sub, rest, { out: values.out, id: values.id, dataDir }, io);
      default:
        io.err(`mia: unknown command ${command}\n\n${USAGE}`);
        return 2;
    }
  } catch (thrown) {
    // A full or failing disk (at start, or under `mia import`) is said as such, not as a trace.
    const error = storageErrorOf(thrown) ?? thrown;
    if (error instanceof MiaError) {
      io.err(`mia: ${error.message}${error.details ? ` (${error.details})` : ''}`);
      return 1;
    }
    throw error;
  }
}
