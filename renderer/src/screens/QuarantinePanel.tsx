/**
 * Changes the hub did not merge on its own (issue 13): a file whose Patient ID the hub holds with
 * other demographics, or work done by a user after the hub disabled them. The admin checks each
 * one and releases it (applied as it was made, and sent to the other workstations) or discards
 * it (kept out for good). Both decisions are kept with who made them.
 */
import type { QuarantinedChange } from '../api/types.ts';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime } from '../format.ts';
import { useSession } from '../session.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from '../use-load.ts';
import { CHANGE_KINDS } from '../change-kinds.ts';

export function QuarantinePanel() {
  const { client } = useSession();
  const items = useLoad(async (signal) => await client.all<QuarantinedChange>('/v1/sync/quarantine', { signal }), [client]);
  const { error, act } = useAction(items.reload);
  const decide = (item: QuarantinedChange, decision: 'release' | 'discard') => {
    const question =
      decision === 'release'
        ? `Release this ${CHANGE_KINDS[item.entity]?.toLowerCase() ?? item.entity}? It is applied as it was made and sent to every workstation.`
        : `Discard this ${CHANGE_KINDS[item.entity]?.toLowerCase() ?? item.entity}? It stays out for good; the workstation keeps its own copy.`;
    if (!window.confirm(question)) return;
    void act(async () => {
      await client.post<QuarantinedChange>(`/v1/sync/quarantine/${encodeURIComponent(item.id)}/${decision}`);
    });
  };

  if (items.state === 'loading') return <Loading what="quarantined changes" />;
  if (items.state === 'error') return <ErrorState error={items.error} retry={items.reload} />;
  return (
    <div className="panel" data-testid="quarantine">
      <InlineError error={error} />
      <div className="toolbar">
        <h2>Kept for an admin ({items.value.length})</h2>
        <button type="button" onClick={items.reload} data-testid="reload-quarantine">
          Refresh
        </button>
      </div>
      {items.value.length === 0 ? (
        <p className="muted">Nothing waits for a decision. Changes the hub will not merge on its own (a Patient ID it holds with another name, work done after a user was disabled) appear here.</p>
      ) : (
        <table className="grid">
          <thead>
            <tr>
              <th>What</th>
              <th>Why it was kept</th>
              <th>Workstation</th>
              <th>Kept</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {items.value.map((q) => (
              <tr key={q.id} data-change-id={q.id}>
                <td>
                  {CHANGE_KINDS[q.entity] ?? q.entity} <span className="mono muted">{q.key}</span>
                </td>
                <td data-testid="quarantine-reason">{q.reason}</td>
                <td className="mono muted">{q.device_id}</td>
                <td>{dateTime(q.created_at)}</td>
                <td>
                  <button type="button" onClick={() => decide(q, 'release')} data-testid="release-change">
                    Release
                  </button>{' '}
                  <button type="button" className="danger" onClick={() => decide(q, 'discard')} data-testid="discard-change">
                    Discard
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
