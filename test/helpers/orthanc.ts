/**
 * A real Orthanc (Debian's `orthanc` and `orthanc-dicomweb`) as a DICOM peer for tests and
 * benchmarks: its own temporary storage, a DICOM port and an HTTP port on loopback, the DICOMweb
 * plugin, and the DICOM nodes and DICOMweb servers it may talk to. No mocks.
 *
 * Orthanc has no option to bind to loopback only (ECOSYSTEM.md): its REST API refuses remote
 * clients ("RemoteAccessAllowed": false); its DICOM port listens on every interface for the
 * test's lifetime, and accepts only the calling AE titles it is given.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../bench/free-port.ts';

export const ORTHANC_BINARY = '/usr/sbin/Orthanc';
export const DICOMWEB_PLUGIN = '/usr/share/orthanc/plugins/libOrthancDicomWeb.so';
const INSTALL_HINT = 'install orthanc: apt-get install orthanc orthanc-dicomweb (or run scripts/system-deps.sh)';

/** A DICOM node Orthanc may query, move to and store to: [AE title, host, port]. */
export type OrthancModality = { aeTitle: string; host: string; port: number };

/** A DICOMweb server Orthanc's DICOMweb client may read from. */
export type OrthancDicomWebServer = { url: string; headers?: Record<string, string> };

export type OrthancOptions = {
  aeTitle?: string;
  /** Known DICOM nodes by name (C-MOVE destinations, C-STORE targets, allowed callers). */
  modalities?: Record<string, OrthancModality>;
  /** Remote DICOMweb servers by name, for its DICOMweb client. */
  dicomWebServers?: Record<string, OrthancDicomWebServer>;
  /** Only known modalities may call (default), or any calling AE. */
  acceptUnknownCallers?: boolean;
  /**
   * An empty folder for its configuration, index and storage, left in place when it stops (the
   * caller removes it later: benchmarks set it aside, see bench/set-aside.ts). By default a
   * temporary folder, removed when it stops.
   */
  dir?: string;
};

export type Orthanc = {
  aeTitle: string;
  dicomPort: number;
  httpPort: number;
  /** http://127.0.0.1:PORT */
  url: string;
  /** http://127.0.0.1:PORT/dicom-web */
  dicomWebUrl: string;
  storageDir: string;
  /** A REST call; throws with Orthanc's answer when the status is not 2xx. */
  rest(path: string, init?: RequestInit): Promise<Response>;
  restJson<T = unknown>(path: string, init?: RequestInit): Promise<T>;
  /** The instances Orthanc holds. */
  instanceIds(): Promise<string[]>;
  /** Orthanc's own log, for a failing test's message. */
  log(): Promise<string>;
  stop(): Promise<void>;
};

export function orthancInstalled(): boolean {
  return existsSync(ORTHANC_BINARY) && existsSync(DICOMWEB_PLUGIN);
}

/** A loopback port free now: the benchmarks' helper, for the tests too. */
export { freePort };

export async function startOrthanc(options: OrthancOptions = {}): Promise<Orthanc> {
  if (!orthancInstalled()) throw new Error(`Orthanc is not installed: ${INSTALL_HINT}`);
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'mia-orthanc-')));
  const removeDir = async (): Promise<void> => {
    if (options.dir === undefined) await rm(dir, { recursive: true, force: true });
  };
  const aeTitle = options.aeTitle ?? 'ORTHANC';
  const dicomPort = await freePort();
  const httpPort = await freePort();
  const logFile = join(dir, 'orthanc.log');
  const modalities = Object.fromEntries(Object.entries(options.modalities ?? {}).map(([name, m]) => [name, [m.aeTitle, m.host, m.port]]));
  const servers = Object.fromEntries(
    Object.entries(options.dicomWebServers ?? {}).map(([name, s]) => [name, { Url: s.url, HttpHeaders: s.headers ?? {} }]),
  );
  const config = {
    Name: `mia-test-${aeTitle}`,
    StorageDirectory: join(dir, 'storage'),
    IndexDirectory: join(dir, 'storage'),
    HttpPort: httpPort,
    DicomPort: dicomPort,
    DicomAet: aeTitle,
    RemoteAccessAllowed: false,
    AuthenticationEnabled: false,
    HttpServerEnabled: true,
    DicomServerEnabled: true,
    DicomCheckCalledAet: false,
    DicomAlwaysAllowEcho: true,
    DicomAlwaysAllowStore: options.acceptUnknownCallers ?? false,
    DicomCheckModalityHost: false,
    UnknownSopClassAccepted: true,
    DicomModalities: modalities,
    DicomModalitiesInDatabase: false,
    Plugins: [DICOMWEB_PLUGIN],
    DicomWeb: { Enable: true, Root: '/dicom-web/', EnableWado: true, Servers: servers, StudiesMetadata: 'Full', SeriesMetadata: 'Full' },
    // Matches the tests' expectation that an instance is on disk when acknowledged.
    SyncStorageArea: true,
    StorageCompression: false,
    LimitFindResults: 0,
    LimitFindInstances: 0,
  };
  await writeFile(join(dir, 'orthanc.json'), JSON.stringify(config, null, 2));
  const child = spawn(ORTHANC_BINARY, [`--logfile=${logFile}`, join(dir, 'orthanc.json')], { stdio: 'ignore' });
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const url = `http://127.0.0.1:${httpPort}`;
  const readLog = async (): Promise<string> => await readFile(logFile, 'utf8').catch(() => '');
  try {
    await waitUntilUp(url, () => exited, readLog);
  } catch (err) {
    await stopChild(child);
    await removeDir();
    throw err;
  }

  const rest = async (path: string, init?: RequestInit): Promise<Response> => {
    const response = await fetch(`${url}${path}`, init);
    if (!response.ok) throw new Error(`Orthanc ${init?.method ?? 'GET'} ${path}: ${response.status} ${await response.text()}`);
    return response;
  };
  return {
    aeTitle,
    dicomPort,
    httpPort,
    url,
    dicomWebUrl: `${url}/dicom-web`,
    storageDir: join(dir, 'storage'),
    rest,
    restJson: async <T,>(path: string, init?: RequestInit): Promise<T> => (await (await rest(path, init)).json()) as T,
    instanceIds: async () => (await (await rest('/instances')).json()) as string[],
    log: readLog,
    async stop() {
      await stopChild(child);
      await removeDir();
    },
  };
}

async function waitUntilUp(url: string, exited: () => boolean, log: () => Promise<string>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (exited()) throw new Error(`Orthanc exited at start:\n${(await log()).slice(-4000)}`);
    try {
      const response = await fetch(`${url}/system`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`Orthanc did not answer within 30 s:\n${(await log()).slice(-4000)}`);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(timer);
}
