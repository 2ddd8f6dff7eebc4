/**
 * The hub's workstations (issue 13, Visible state): each one's last contact, how many changes it
 * has not pulled yet (lag), its clock against the hub's, and Revoke, which refuses its key at
 * once; Enroll makes a device and shows its key once, for `mia sync join` on the workstation.
 */
import { useState, type FormEvent } from 'react';
import type { Device, EnrolledDevice } from '../api/types.ts';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime } from '../format.ts';
import { useSession } from '../session.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from '../use-load.ts';
import { SecretNotice, type Secret } from './SecretNotice.tsx';

function offsetText(ms: number | null): string {
  if (ms === null) return '—';
  const abs = Math.abs(ms);
  const text = abs < 1000 ? `${abs} ms` : abs < 120_000 ? `${Math.round(abs / 1000)} s` : abs < 7_200_000 ? `${Math.round(abs / 60_000)} min` : `${Math.round(abs / 3_600_000)} h`;
  return ms === 0 ? 'in step' : `${text} ${ms > 0 ? 'ahead' : 'behind'}`;
}

export function DevicesPanel() {
  const { client } = useSession();
  const devices = useLoad(async (signal) => await client.all<Device>('/v1/devices', { signal }), [client]);
  const [name, setName] = useState('');
  const [secret, setSecret] = useState<Secret | null>(null);
  const { error, act } = useAction(devices.reload);
  const enroll = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      const enrolled = await client.post<EnrolledDevice>('/v1/devices', { body: { name } });
      setSecret({ kind: 'device', key: enrolled.key, keyId: `${enrolled.device.name} (${enrolled.device.id})` });
      setName('');
    });
  };
  const revoke = (device: Device) => {
    if (!window.confirm(`Revoke ${device.name}? Its key stops working at once; its unsynced work stays on it.`)) return;
    void act(async () => {
      await client.del<Device>(`/v1/devices/${encodeURIComponent(device.id)}`);
    });
  };

  if (devices.state === 'loading') return <Loading what="workstations" />;
  if (devices.state === 'error') return <ErrorState error={devices.error} retry={devices.reload} />;
  return (
    <div className="panel" data-testid="devices">
      {secret ? <SecretNotice secret={secret} onClose={() => setSecret(null)} /> : null}
      <InlineError error={error} />
      <div className="toolbar">
        <h2>Workstations</h2>
        <button type="button" onClick={devices.reload} data-testid="reload-devices">
          Refresh
        </button>
      </div>
      <form className="form-row" onSubmit={enroll}>
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. CT reading room 2" data-testid="device-name" required maxLength={64} />
        </label>
        <button type="submit" className="primary" data-testid="enroll-device">
          Enroll workstation
        </button>
      </form>
      {devices.value.length === 0 ? (
        <p className="muted">No workstation is enrolled. Enroll one, then on it run mia sync join with this hub&apos;s URL and the key.</p>
      ) : (
        <table className="grid">
          <thead>
            <tr>
              <th>Workstation</th>
              <th>Status</th>
              <th>Last seen</th>
              <th title="Changes on the hub it has not pulled yet">Lag</th>
              <th>Clock</th>
              <th title="Audit event numbers of the workstation that never reached the hub">Audit gaps</th>
              <th>Enrolled</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {devices.value.map((d) => (
              <tr key={d.id} data-device-id={d.id}>
                <td>
                  {d.name} <span className="mono muted">{d.id}</span>
                </td>
                <td>{d.status === 'revoked' ? `revoked ${dateTime(d.revoked_at)}` : 'active'}</td>
                <td>{dateTime(d.last_seen_at)}</td>
                <td data-testid="device-lag">{d.lag}</td>
                <td className={d.clock_offset_ms !== null && Math.abs(d.clock_offset_ms) > 300_000 ? 'warn' : ''} data-testid="device-clock">
                  {offsetText(d.clock_offset_ms)}
                </td>
                <td className={d.audit_gap_events > 0 ? 'warn' : ''} data-testid="device-audit-gaps">
                  {d.audit_gap_events}
                </td>
                <td>{dateTime(d.created_at)}</td>
                <td>
                  {d.status === 'active' ? (
                    <button type="button" className="danger" onClick={() => revoke(d)} data-testid="revoke-device">
                      Revoke
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
