/**
 * The header's sync state (issue 13, Visible state): online or offline, the changes waiting to
 * reach the hub, when it last synced, and the error when it could not; "Sync now" runs a round.
 * A workstation not linked to a hub (and the hub itself) shows nothing.
 */
import { useEffect, useState } from 'react';
import type { Client } from '../api/client.ts';
import type { SyncStatus } from '../api/types.ts';
import { errorText } from '../format.ts';

const POLL_MS = 5_000;

function since(iso: string | null): string {
  if (!iso) return 'never';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return new Date(iso).toLocaleString();
}

export function SyncIndicator({ client }: { client: Client }) {
  const [status, setStatus] = useState<SyncStatus | null>(null);
  const [running, setRunning] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    const load = async (): Promise<void> => {
      try {
        setStatus(await client.get<SyncStatus>('/v1/sync/status', { signal: controller.signal }));
        setFailure(null);
      } catch (err) {
        if (!controller.signal.aborted) setFailure(errorText(err));
      }
    };
    void load();
    const timer = setInterval(() => void load(), POLL_MS);
    return () => {
      controller.abort();
      clearInterval(timer);
    };
  }, [client]);

  if (!status || !status.linked) return failure ? <span className="sync-state offline" data-testid="sync-state" title={failure}>Sync: unknown</span> : null;
  const state = running ? 'syncing' : status.state;
  const label = state === 'online' ? 'Online' : state === 'syncing' ? 'Syncing…' : 'Offline';
  const title = [
    `Hub: ${status.hub_url ?? '?'} (device ${status.device_name ?? status.device_id ?? '?'})`,
    `Last sync: ${status.last_sync_at ?? 'never'}`,
    status.last_error ? `Error: ${status.last_error}` : null,
    status.waiting_reason ? `Waiting: ${status.waiting_reason}` : null,
    status.refused > 0 ? `${status.refused} change(s) refused by the hub` : null,
  ].filter(Boolean).join('\n');

  const runNow = async (): Promise<void> => {
    setRunning(true);
    try {
      setStatus(await client.post<SyncStatus>('/v1/sync/run'));
      setFailure(null);
    } catch (err) {
      setFailure(errorText(err));
    } finally {
      setRunning(false);
    }
  };

  return (
    <span className={`sync-state ${state}`} data-testid="sync-state">
      <span className="sync-text" title={title}>
      <span data-testid="sync-label">{label}</span>
      {' · '}
      <span data-testid="sync-pending">{status.pending} pending</span>
      {status.refused > 0 ? <span className="sync-refused" data-testid="sync-refused"> · {status.refused} refused</span> : null}
      {' · '}
      <span data-testid="sync-last">synced {since(status.last_sync_at)}</span>
      {status.last_error && state !== 'syncing' ? <span className="sync-error" data-testid="sync-error"> · {status.last_error}</span> : null}
      </span>
      <button type="button" className="link-button" onClick={() => void runNow()} disabled={running} data-testid="sync-now">
        Sync now
      </button>
    </span>
  );
}
