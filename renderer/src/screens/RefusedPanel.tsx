/**
 * This workstation's changes the hub refused for good (docs/sync.md, Transport): a value the hub
 * does not store, or a file damaged on this disk. Each stays here with the reason; once its cause
 * is mended (the file restored from a backup, the hub upgraded) the admin sends it again, and the
 * next sync round takes it. Shown on a workstation linked to a hub only.
 */
import type { RefusedChange, SyncStatus } from '../api/types.ts';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime } from '../format.ts';
import { useSession } from '../session.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from '../use-load.ts';
import { CHANGE_KINDS } from '../change-kinds.ts';

export function RefusedPanel() {
  const { client } = useSession();
  const loaded = useLoad(
    async (signal) => {
      const status = await client.get<SyncStatus>('/v1/sync/status', { signal });
      return status.linked ? await client.all<RefusedChange>('/v1/sync/refused', { signal }) : null;
    },
    [client],
  );
  const { error, act } = useAction(loaded.reload);
  const sendAgain = (item: RefusedChange) => {
    const what = CHANGE_KINDS[item.entity]?.toLowerCase() ?? item.entity;
    if (!window.confirm(`Send this ${what} to the hub again with the next sync? Do so once its cause is mended: the hub refuses it again otherwise.`)) return;
    void act(async () => {
      await client.post<SyncStatus>(`/v1/sync/refused/${encodeURIComponent(item.id)}/send-again`);
    });
  };

  if (loaded.state === 'loading') return <Loading what="refused changes" />;
  if (loaded.state === 'error') return <ErrorState error={loaded.error} retry={loaded.reload} />;
  const items = loaded.value;
  if (items === null) return null;
  return (
    <div className="panel" data-testid="refused">
      <InlineError error={error} />
      <div className="toolbar">
        <h2>Refused by the hub ({items.length})</h2>
        <button type="button" onClick={loaded.reload} data-testid="reload-refused">
          Refresh
        </button>
      </div>
      {items.length === 0 ? (
        <p className="muted">The hub has taken every change sent from here. A change it refuses for good (a value it does not store, a file damaged on this disk) appears here with the reason.</p>
      ) : (
        <table className="grid">
          <thead>
            <tr>
              <th>What</th>
              <th>Why it was refused</th>
              <th>Made</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {items.map((r) => (
              <tr key={r.id} data-change-id={r.id}>
                <td>
                  {CHANGE_KINDS[r.entity] ?? r.entity} <span className="mono muted">{r.key}</span>
                </td>
                <td data-testid="refused-reason">{r.reason}</td>
                <td>{dateTime(r.made_at)}</td>
                <td>
                  <button type="button" onClick={() => sendAgain(r)} data-testid="send-again">
                    Send again
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
