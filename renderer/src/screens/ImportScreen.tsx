/**
 * Import: in Electron a native folder picker (IPC through the preload) or a typed path; in a
 * browser, drag and drop files, each uploaded with POST /v1/instances. Then the job's progress
 * (SSE) with rejected files and reasons.
 */
import { useCallback, useEffect, useState, type DragEvent, type FormEvent } from 'react';
import type { ImportJob } from '../api/types.ts';
import { InlineError } from '../components/StateMessage.tsx';
import { errorText } from '../format.ts';
import { useSession } from '../session.ts';

type Upload = { total: number; done: number; stored: number; failed: { name: string; reason: string }[] };

function isJob(value: unknown): value is ImportJob {
  return typeof value === 'object' && value !== null && 'id' in value && 'counts' in value;
}

export function ImportScreen() {
  const { client, desktop } = useSession();
  const [path, setPath] = useState('');
  const [job, setJob] = useState<ImportJob | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [over, setOver] = useState(false);
  const [upload, setUpload] = useState<Upload | null>(null);

  const jobId = job?.id ?? null;
  // Follow the job's events; fall back to one fetch at the end for the full reject list. Only a
  // running job has events to follow: the server's end states are completed, failed and
  // interrupted (server/api/import-schemas.ts).
  useEffect(() => {
    if (!job || job.status !== 'running') return;
    const controller = new AbortController();
    const id = job.id;
    client
      .events(
        `/v1/imports/${encodeURIComponent(id)}/events`,
        (event) => {
          try {
            const data: unknown = JSON.parse(event.data);
            if (event.event === 'progress' && typeof data === 'object' && data !== null && 'counts' in data) {
              setJob((current) => (current ? { ...current, ...(data as Partial<ImportJob>) } : current));
            } else if (event.event === 'reject' && typeof data === 'object' && data !== null && 'path' in data && 'reason' in data) {
              const reject = { path: String(data.path), reason: String(data.reason) };
              setJob((current) => (current ? { ...current, rejects: [...current.rejects, reject] } : current));
            }
          } catch {
            // A malformed event is skipped; the final fetch below shows the true state.
          }
        },
        controller.signal,
      )
      .then(() => client.get<ImportJob>(`/v1/imports/${encodeURIComponent(id)}`))
      .then((final) => setJob(final))
      .catch((caught: unknown) => {
        if (!controller.signal.aborted) setError(caught);
      });
    return () => controller.abort();
    // Only a new job id restarts the stream.
  }, [client, jobId]);

  const start = useCallback(
    async (folder: string) => {
      setError(null);
      setUpload(null);
      try {
        const started = await client.post<ImportJob>('/v1/imports', { body: { path: folder } });
        setJob({ ...started, rejects: started.rejects ?? [] });
      } catch (caught) {
        setError(caught);
      }
    },
    [client],
  );

  const pick = async () => {
    if (!desktop) return;
    const folder = await desktop.pickFolder();
    if (folder) {
      setPath(folder);
      await start(folder);
    }
  };

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (path.trim()) void start(path.trim());
  };

  const drop = async (event: DragEvent) => {
    event.preventDefault();
    setOver(false);
    const files = [...event.dataTransfer.files];
    if (files.length === 0) return;
    setJob(null);
    setError(null);
    const state: Upload = { total: files.length, done: 0, stored: 0, failed: [] };
    setUpload({ ...state });
    for (const file of files) {
      try {
        const reply = await client.upload<unknown>('/v1/instances', file, 'application/dicom');
        state.stored += 1;
        if (isJob(reply)) setJob(reply);
      } catch (caught) {
        state.failed.push({ name: file.name, reason: errorText(caught) });
      }
      state.done += 1;
      setUpload({ ...state, failed: [...state.failed] });
    }
  };

  const counts = job?.counts;
  return (
    <section data-testid="import">
      <div className="panel">
        <h2>Import DICOM</h2>
        <p className="muted">Series appear on the worklist as they are imported. Duplicates are skipped; files that are not DICOM images are listed with the reason.</p>
        <form className="form-row" onSubmit={submit}>
          {desktop ? (
            <button type="button" className="primary" onClick={() => void pick()} data-testid="pick-folder">
              Choose folder or disc…
            </button>
          ) : null}
          <label>
            Folder on this machine
            <input value={path} onChange={(e) => setPath(e.target.value)} placeholder="/media/cdrom or C:\studies\..." size={50} data-testid="import-path" />
          </label>
          <button type="submit" disabled={!path.trim()}>
            Import folder
          </button>
        </form>
      </div>
      {!desktop ? (
        <div
          className={`dropzone${over ? ' over' : ''}`}
          onDragOver={(e) => {
            e.preventDefault();
            setOver(true);
          }}
          onDragLeave={() => setOver(false)}
          onDrop={(e) => void drop(e)}
          data-testid="dropzone"
        >
          Drop DICOM files here to upload them
          {upload ? (
            <p>
              Uploaded {upload.done} of {upload.total} ({upload.stored} accepted, {upload.failed.length} refused)
            </p>
          ) : null}
        </div>
      ) : null}
      <InlineError error={error} />
      {upload && upload.failed.length > 0 ? (
        <div className="panel">
          <h3>Refused uploads</h3>
          <ul>
            {upload.failed.map((f) => (
              <li key={f.name}>
                <b>{f.name}</b>: {f.reason}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {job && counts ? (
        <div className="panel" data-testid="import-job">
          <h3>
            Import {job.id}: {job.status}
          </h3>
          <div className="progress">
            <div style={{ width: `${counts.files_seen === 0 ? 0 : Math.round(((counts.imported + counts.duplicates + counts.conflicts + counts.rejected) / counts.files_seen) * 100)}%` }} />
          </div>
          <p>
            {counts.files_seen} files seen · {counts.imported} imported · {counts.duplicates} duplicates · {counts.conflicts} conflicts · {counts.rejected} rejected
          </p>
          {job.rejects.length > 0 ? (
            <table className="grid">
              <thead>
                <tr>
                  <th>Rejected file</th>
                  <th>Reason</th>
                </tr>
              </thead>
              <tbody>
                {job.rejects.map((r, i) => (
                  <tr key={`${r.path}-${i}`}>
                    <td className="mono">{r.path}</td>
                    <td>{r.reason}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          {job.status !== 'running' ? (
            <p>
              <a href="#/worklist">Open the worklist</a> to read the imported scans.
            </p>
          ) : null}
        </div>
      ) : null}
    </section>
  );
}
