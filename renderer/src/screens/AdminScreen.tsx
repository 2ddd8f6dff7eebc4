/**
 * Admin: users and their keys (create with the key shown once and a copy button; rotate,
 * showing the new key and when the old one stops working; revoke) and the audit trail.
 */
import { useState, type FormEvent } from 'react';
import { GRANTABLE_SCOPES, ROLES, type GrantableScope, type Role } from '../../../common/vocabulary.ts';
import type { ApiKey, AuditEvent, IssuedKey, Page, RotatedKey, User } from '../api/types.ts';
import { AUDIT_ACTIONS, reviewVerdict } from '../audit-actions.ts';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from '../use-load.ts';
import { DevicesPanel } from './DevicesPanel.tsx';
import { DicomPanel } from './DicomPanel.tsx';
import { QuarantinePanel } from './QuarantinePanel.tsx';
import { RefusedPanel } from './RefusedPanel.tsx';
import { SecretNotice, type Secret } from './SecretNotice.tsx';

export function AdminScreen() {
  const { me } = useSession();
  return (
    <section className="admin" data-testid="admin">
      {hasScope(me, 'manage:users') ? <UsersAndKeys /> : null}
      {hasScope(me, 'manage:users') ? <DevicesPanel /> : null}
      {hasScope(me, 'manage:users') ? <QuarantinePanel /> : null}
      {hasScope(me, 'manage:users') ? <RefusedPanel /> : null}
      {hasScope(me, 'manage:users') ? <DicomPanel /> : null}
      {hasScope(me, 'read:audit') ? <AuditTrail /> : null}
    </section>
  );
}

function UsersAndKeys() {
  const { client } = useSession();
  const data = useLoad(
    async (signal) => {
      const [users, keys] = await Promise.all([client.all<User>('/v1/users', { signal }), client.all<ApiKey>('/v1/auth/keys', { signal })]);
      return { users, keys };
    },
    [client],
  );
  const [secret, setSecret] = useState<Secret | null>(null);
  const { error, act } = useAction(data.reload);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('radiologist');
  const [keyUser, setKeyUser] = useState('');
  const [keyName, setKeyName] = useState('');
  const [extra, setExtra] = useState<GrantableScope[]>([]);

  const createUser = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      const user = await client.post<User>('/v1/users', { body: { email, role } });
      setEmail('');
      setKeyUser(user.id);
    });
  };
  const createKey = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      const issued = await client.post<IssuedKey>('/v1/auth/keys', {
        body: { ...(keyUser ? { user_id: keyUser } : {}), ...(keyName ? { name: keyName } : {}), scopes: extra },
      });
      setSecret({ kind: 'created', key: issued.key, keyId: issued.api_key.id });
      setKeyName('');
    });
  };
  const rotate = (key: ApiKey) => {
    if (!window.confirm(`Rotate key ${key.prefix}…? The old key keeps working for 24 hours.`)) return;
    void act(async () => {
      const rotated = await client.post<RotatedKey>(`/v1/auth/keys/${encodeURIComponent(key.id)}/rotate`);
      setSecret({ kind: 'rotated', key: rotated.key, keyId: rotated.api_key.id, oldKeyId: rotated.previous.id, oldExpiresAt: rotated.previous.expires_at });
    });
  };
  const revoke = (key: ApiKey) => {
    if (!window.confirm(`Revoke key ${key.prefix}…? It stops working immediately.`)) return;
    void act(async () => {
      await client.del<ApiKey>(`/v1/auth/keys/${encodeURIComponent(key.id)}`);
    });
  };

  if (data.state === 'loading') return <Loading what="users and keys" />;
  if (data.state === 'error') return <ErrorState error={data.error} retry={data.reload} />;
  const { users, keys } = data.value;
  const emailOf = new Map(users.map((u) => [u.id, u.email]));

  return (
    <>
      {secret ? <SecretNotice secret={secret} onClose={() => setSecret(null)} /> : null}
      <InlineError error={error} />
      <div className="panel">
        <div className="toolbar">
          <h2>Users</h2>
        </div>
        <form className="form-row" onSubmit={createUser}>
          <label>
            Email
            <input type="email" required value={email} onChange={(e) => setEmail(e.target.value)} data-testid="new-user-email" />
          </label>
          <label>
            Role
            <select value={role} onChange={(e) => setRole(ROLES.find((r) => r === e.target.value) ?? 'radiologist')}>
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          </label>
          <button type="submit">Create user</button>
        </form>
        <table className="grid">
          <thead>
            <tr>
              <th>Email</th>
              <th>Role</th>
              <th>Status</th>
              <th>Created</th>
              <th>Keys</th>
            </tr>
          </thead>
          <tbody>
            {users.map((user) => (
              <tr key={user.id}>
                <td>{user.email}</td>
                <td>{user.role}</td>
                <td>{user.status}</td>
                <td>{dateTime(user.created_at)}</td>
                <td>{keys.filter((k) => k.user_id === user.id && (k.status === 'active' || k.status === 'expiring')).length} working</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="panel">
        <div className="toolbar">
          <h2>API keys</h2>
          <button type="button" onClick={data.reload} data-testid="reload-keys">
            Refresh
          </button>
        </div>
        <form className="form-row" onSubmit={createKey}>
          <label>
            For user
            <select value={keyUser} onChange={(e) => setKeyUser(e.target.value)} data-testid="key-user">
              <option value="">myself</option>
              {users.map((u) => (
                <option key={u.id} value={u.id}>
                  {u.email} ({u.role})
                </option>
              ))}
            </select>
          </label>
          <label>
            Name
            <input value={keyName} onChange={(e) => setKeyName(e.target.value)} placeholder="e.g. PACS bridge" />
          </label>
          {GRANTABLE_SCOPES.map((scope) => (
            <label key={scope} className="check">
              <input
                type="checkbox"
                checked={extra.includes(scope)}
                onChange={(e) => setExtra((list) => (e.target.checked ? [...list, scope] : list.filter((s) => s !== scope)))}
              />
              {scope}
            </label>
          ))}
          <button type="submit" className="primary" data-testid="create-key">
            Create key
          </button>
        </form>
        <table className="grid">
          <thead>
            <tr>
              <th>Key</th>
              <th>User</th>
              <th>Name</th>
              <th>Scopes</th>
              <th>Status</th>
              <th>Last used</th>
              <th>Stops working</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {keys.map((key) => (
              <tr key={key.id} data-key-id={key.id}>
                <td className="mono">{key.prefix}…</td>
                <td>{emailOf.get(key.user_id) ?? key.user_id}</td>
                <td>{key.name ?? '—'}</td>
                <td className="mono">{key.scopes.join(' ')}</td>
                <td>{key.status}</td>
                <td>{dateTime(key.last_used_at)}</td>
                <td>{key.revoked_at ? `revoked ${dateTime(key.revoked_at)}` : dateTime(key.expires_at)}</td>
                <td>
                  {key.status === 'active' ? (
                    <>
                      <button type="button" onClick={() => rotate(key)} data-testid="rotate-key">
                        Rotate
                      </button>{' '}
                      <button type="button" className="danger" onClick={() => revoke(key)} data-testid="revoke-key">
                        Revoke
                      </button>
                    </>
                  ) : key.status === 'expiring' ? (
                    <button type="button" className="danger" onClick={() => revoke(key)} data-testid="revoke-key">
                      Revoke now
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/**
 * The audit trail, most recent first (order=newest): what a reader of the trail usually wants is
 * what just happened. Filtered by action from the server's known actions; a findings.review
 * event shows its verdict (accepted, rejected or cleared) from the end of its target.
 */
function AuditTrail() {
  const { client } = useSession();
  const [action, setAction] = useState('');
  const [cursor, setCursor] = useState<string | null>(null);
  const page = useLoad(
    (signal) => client.get<Page<AuditEvent>>('/v1/audit', { signal, query: { action, cursor, limit: 100, order: 'newest' } }),
    [client, action, cursor],
  );
  return (
    <div className="panel" data-testid="audit">
      <div className="toolbar">
        <h2>Audit trail</h2>
        <span className="muted">most recent first</span>
        <label>
          Action{' '}
          <select
            value={action}
            onChange={(e) => {
              setAction(e.target.value);
              setCursor(null);
            }}
            data-testid="audit-action"
          >
            <option value="">all actions</option>
            {AUDIT_ACTIONS.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <button type="button" onClick={page.reload} data-testid="audit-reload">
          Refresh
        </button>
        {cursor ? (
          <button type="button" onClick={() => setCursor(null)}>
            Newest
          </button>
        ) : null}
        {page.state === 'ready' && page.value.next_cursor ? (
          <button type="button" onClick={() => setCursor(page.value.next_cursor)}>
            Older
          </button>
        ) : null}
      </div>
      {page.state === 'loading' ? <Loading what="audit events" /> : null}
      {page.state === 'error' ? <ErrorState error={page.error} retry={page.reload} /> : null}
      {page.state === 'ready' ? (
        <table className="grid">
          <thead>
            <tr>
              <th>When (UTC)</th>
              <th>Action</th>
              <th>Outcome</th>
              <th>User</th>
              <th>Key</th>
              <th>Target</th>
              <th>Verdict</th>
              <th>Patient</th>
            </tr>
          </thead>
          <tbody>
            {page.value.items.map((event) => {
              const verdict = reviewVerdict(event.target);
              const patients = event.patient_ids && event.patient_ids.length > 0 ? event.patient_ids : event.patient_id ? [event.patient_id] : [];
              return (
                <tr key={event.id} data-testid="audit-event" data-action={event.action} data-event-id={event.id}>
                  <td className="mono">{event.at}</td>
                  <td>{event.action}</td>
                  <td>
                    {event.outcome} {event.status_code ?? ''}
                    {event.count !== undefined && event.count > 1 ? ` ×${event.count}` : ''}
                  </td>
                  <td className="mono">{event.user_id ?? event.address ?? '—'}</td>
                  <td className="mono">{event.key_id ?? '—'}</td>
                  <td className="mono">{verdict ? (event.target ?? '').replace(/ review:\w+$/, '') : (event.target ?? '—')}</td>
                  <td data-testid="audit-verdict">{verdict ? <span className={`verdict verdict-${verdict}`}>{verdict}</span> : ''}</td>
                  <td title={patients.join(', ')}>{patients.length === 0 ? '—' : patients.length <= 3 ? patients.join(', ') : `${patients.slice(0, 3).join(', ')} +${patients.length - 3}`}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}
