/**
 * DICOM (issue 14): the peers mia talks to (DICOM nodes by AE title, host and port, and DICOMweb
 * servers by URL; "allow incoming" lets a node call mia's SCP), the routing rules that send an
 * analysis's or a signed report's SR to a peer, and the send jobs they made with their outcome,
 * attempts and last error, and Retry for one that failed or gave up.
 */
import { useState, type FormEvent } from 'react';
import type { DicomPeer, RoutedEvent, RoutingRule, SendJob, SendStatus } from '../api/dicom-types.ts';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime } from '../format.ts';
import { useSession } from '../session.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from '../use-load.ts';

const EVENTS: Record<RoutedEvent, string> = { 'analysis.finished': 'An analysis finishes', 'report.finalized': 'A report is signed', 'instance.received': 'An image arrives' };
const EVENT_VALUES = Object.keys(EVENTS) as RoutedEvent[];
const STATUS_TEXT: Record<SendStatus, string> = { queued: 'queued', running: 'sending', sent: 'sent', failed: 'failed, retrying', gave_up: 'gave up' };

function peerAddress(peer: DicomPeer): string {
  return peer.kind === 'dimse' ? `${peer.ae_title ?? ''}@${peer.host ?? ''}:${peer.port ?? ''}` : (peer.url ?? '');
}

function conditionsText(rule: RoutingRule): string {
  const c = rule.conditions;
  const parts = [
    c.modalities?.length ? c.modalities.join(' or ') : '',
    c.model_id ? `model ${c.model_id}` : '',
    c.labels?.length ? `finding ${c.labels.join(' or ')}` : '',
    c.positive_only ? 'any finding' : '',
  ].filter((p) => p !== '');
  return parts.length > 0 ? parts.join(', ') : 'always';
}

export function DicomPanel() {
  const { client } = useSession();
  const data = useLoad(
    async (signal) => {
      // Peers and rules are few and listed whole (no paging); jobs page like every long list.
      const [peers, rules, jobs] = await Promise.all([
        client.get<{ items: DicomPeer[] }>('/v1/dicom/peers', { signal }),
        client.get<{ items: RoutingRule[] }>('/v1/dicom/routes', { signal }),
        client.all<SendJob>('/v1/dicom/sends', { signal }),
      ]);
      return { peers: peers.items, rules: rules.items, jobs };
    },
    [client],
  );
  const { error, act } = useAction(data.reload);

  const [peerKind, setPeerKind] = useState<'dimse' | 'dicomweb'>('dimse');
  const [peerName, setPeerName] = useState('');
  const [aeTitle, setAeTitle] = useState('');
  const [host, setHost] = useState('');
  const [port, setPort] = useState('104');
  const [url, setUrl] = useState('');
  const [authorization, setAuthorization] = useState('');
  const [incoming, setIncoming] = useState(false);

  const [ruleName, setRuleName] = useState('');
  const [ruleEvent, setRuleEvent] = useState<RoutedEvent>('analysis.finished');
  const [rulePeer, setRulePeer] = useState('');
  const [modalities, setModalities] = useState('');
  const [positiveOnly, setPositiveOnly] = useState(false);

  const addPeer = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      const body =
        peerKind === 'dimse'
          ? { kind: 'dimse', name: peerName, ae_title: aeTitle, host, port: Number(port), allow_incoming: incoming }
          : { kind: 'dicomweb', name: peerName, url, ...(authorization ? { authorization } : {}) };
      await client.post<DicomPeer>('/v1/dicom/peers', { body });
      setPeerName('');
      setAuthorization('');
    });
  };
  const toggleIncoming = (peer: DicomPeer) => {
    void act(async () => {
      await client.put<DicomPeer>(`/v1/dicom/peers/${encodeURIComponent(peer.id)}`, {
        body: { kind: 'dimse', name: peer.name, ae_title: peer.ae_title, host: peer.host, port: peer.port, allow_incoming: !peer.allow_incoming },
      });
    });
  };
  const removePeer = (peer: DicomPeer) => {
    if (!window.confirm(`Remove ${peer.name}? Rules that send to it stop sending; it can no longer call mia.`)) return;
    void act(async () => {
      await client.del<DicomPeer>(`/v1/dicom/peers/${encodeURIComponent(peer.id)}`);
    });
  };

  const addRule = (event: FormEvent) => {
    event.preventDefault();
    const list = modalities.split(/[\s,]+/).map((m) => m.trim().toUpperCase()).filter((m) => m !== '');
    void act(async () => {
      await client.post<RoutingRule>('/v1/dicom/routes', {
        body: {
          name: ruleName,
          event: ruleEvent,
          peer: rulePeer,
          conditions: { ...(list.length > 0 ? { modalities: list } : {}), ...(positiveOnly && ruleEvent !== 'instance.received' ? { positive_only: true } : {}) },
        },
      });
      setRuleName('');
      setModalities('');
    });
  };
  const setEnabled = (rule: RoutingRule, enabled: boolean) => {
    void act(async () => {
      await client.put<RoutingRule>(`/v1/dicom/routes/${encodeURIComponent(rule.id)}`, {
        body: { name: rule.name, enabled, event: rule.event, object: rule.object, conditions: rule.conditions, peer: rule.peer_id },
      });
    });
  };
  const removeRule = (rule: RoutingRule) => {
    if (!window.confirm(`Remove the rule ${rule.name}? What it already sent stays listed.`)) return;
    void act(async () => {
      await client.del<RoutingRule>(`/v1/dicom/routes/${encodeURIComponent(rule.id)}`);
    });
  };
  const retry = (job: SendJob) => {
    void act(async () => {
      await client.post<SendJob>(`/v1/dicom/sends/${encodeURIComponent(job.id)}/retry`);
    });
  };

  if (data.state === 'loading') return <Loading what="DICOM peers and routing" />;
  if (data.state === 'error') return <ErrorState error={data.error} retry={data.reload} />;
  const { peers, rules, jobs } = data.value;
  const peerNames = new Map(peers.map((p) => [p.id, p.name]));
  const ruleNames = new Map(rules.map((r) => [r.id, r.name]));

  return (
    <>
      <InlineError error={error} />
      <div className="panel" data-testid="dicom-peers">
        <div className="toolbar">
          <h2>DICOM peers</h2>
          <button type="button" onClick={data.reload} data-testid="reload-dicom">
            Refresh
          </button>
        </div>
        <form className="form-row" onSubmit={addPeer}>
          <label>
            Kind
            <select value={peerKind} onChange={(e) => setPeerKind(e.target.value === 'dicomweb' ? 'dicomweb' : 'dimse')} data-testid="peer-kind">
              <option value="dimse">DICOM node</option>
              <option value="dicomweb">DICOMweb server</option>
            </select>
          </label>
          <label>
            Name
            <input value={peerName} onChange={(e) => setPeerName(e.target.value)} required maxLength={64} placeholder="e.g. Main PACS" data-testid="peer-name" />
          </label>
          {peerKind === 'dimse' ? (
            <>
              <label>
                AE title
                <input value={aeTitle} onChange={(e) => setAeTitle(e.target.value)} required maxLength={16} data-testid="peer-ae-title" />
              </label>
              <label>
                Host
                <input value={host} onChange={(e) => setHost(e.target.value)} required data-testid="peer-host" />
              </label>
              <label>
                Port
                <input type="number" min={1} max={65535} value={port} onChange={(e) => setPort(e.target.value)} required data-testid="peer-port" />
              </label>
              <label className="check">
                <input type="checkbox" checked={incoming} onChange={(e) => setIncoming(e.target.checked)} />
                may call mia
              </label>
            </>
          ) : (
            <>
              <label>
                URL
                <input type="url" value={url} onChange={(e) => setUrl(e.target.value)} required placeholder="https://pacs/dicom-web" data-testid="peer-url" />
              </label>
              <label>
                Authorization header
                <input type="password" value={authorization} onChange={(e) => setAuthorization(e.target.value)} placeholder="optional, never shown again" autoComplete="off" />
              </label>
            </>
          )}
          <button type="submit" className="primary" data-testid="add-peer">
            Add peer
          </button>
        </form>
        {peers.length === 0 ? (
          <p className="muted">No peer yet. Add the PACS that should receive mia&apos;s results, or a modality that sends images to mia.</p>
        ) : (
          <table className="grid">
            <thead>
              <tr>
                <th>Peer</th>
                <th>Kind</th>
                <th>Address</th>
                <th>Incoming</th>
                <th>Added</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {peers.map((p) => (
                <tr key={p.id} data-peer-id={p.id}>
                  <td>{p.name}</td>
                  <td>{p.kind === 'dimse' ? 'DICOM node' : 'DICOMweb'}</td>
                  <td className="mono">
                    {peerAddress(p)}
                    {p.has_authorization ? ' (with Authorization)' : ''}
                  </td>
                  <td>
                    {p.kind === 'dimse' ? (
                      <label className="check">
                        <input type="checkbox" checked={p.allow_incoming} onChange={() => toggleIncoming(p)} data-testid="peer-incoming" />
                        allowed
                      </label>
                    ) : (
                      '—'
                    )}
                  </td>
                  <td>{dateTime(p.created_at)}</td>
                  <td>
                    <button type="button" className="danger" onClick={() => removePeer(p)} data-testid="remove-peer">
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>

      <div className="panel" data-testid="routing-rules">
        <div className="toolbar">
          <h2>Routing rules</h2>
        </div>
        <form className="form-row" onSubmit={addRule}>
          <label>
            Name
            <input value={ruleName} onChange={(e) => setRuleName(e.target.value)} required maxLength={64} placeholder="e.g. CT results to PACS" data-testid="rule-name" />
          </label>
          <label>
            When
            <select value={ruleEvent} onChange={(e) => setRuleEvent(EVENT_VALUES.find((v) => v === e.target.value) ?? 'analysis.finished')} data-testid="rule-event">
              {Object.entries(EVENTS).map(([value, text]) => (
                <option key={value} value={value}>
                  {text}
                </option>
              ))}
            </select>
          </label>
          <label>
            Modalities
            <input value={modalities} onChange={(e) => setModalities(e.target.value)} placeholder="any, or e.g. CT MR" data-testid="rule-modalities" />
          </label>
          <label className="check">
            <input type="checkbox" checked={positiveOnly && ruleEvent !== 'instance.received'} disabled={ruleEvent === 'instance.received'} onChange={(e) => setPositiveOnly(e.target.checked)} />
            only with a finding
          </label>
          <label>
            {ruleEvent === 'instance.received' ? 'Forward it to' : 'Send its SR to'}
            <select value={rulePeer} onChange={(e) => setRulePeer(e.target.value)} required data-testid="rule-peer">
              <option value="">choose a peer</option>
              {peers.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" className="primary" data-testid="add-rule">
            Add rule
          </button>
        </form>
        {rules.length === 0 ? (
          <p className="muted">No rule: nothing is sent by itself. A rule sends an analysis&apos;s SR when it finishes, a report&apos;s SR when it is signed, or forwards an image as it arrives.</p>
        ) : (
          <table className="grid">
            <thead>
              <tr>
                <th>Rule</th>
                <th>When</th>
                <th>If</th>
                <th>Sends</th>
                <th>To</th>
                <th>Enabled</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {rules.map((r) => (
                <tr key={r.id} data-rule-id={r.id}>
                  <td>{r.name}</td>
                  <td>{EVENTS[r.event]}</td>
                  <td>{conditionsText(r)}</td>
                  <td>{r.object === 'report_sr' ? 'report SR' : r.object === 'analysis_sr' ? 'analysis SR' : 'the image'}</td>
                  <td>
                    {r.peer_name ?? <span className="muted">removed peer</span>} {r.method ? <span className="muted">by {r.method === 'c-store' ? 'C-STORE' : 'STOW-RS'}</span> : null}
                  </td>
                  <td>
                    <label className="check">
                      <input type="checkbox" checked={r.enabled} onChange={(e) => setEnabled(r, e.target.checked)} data-testid="rule-enabled" />
                      {r.enabled ? 'on' : 'off'}
                    </label>
                  </td>
                  <td>
                    <button type="button" className="danger" onClick={() => removeRule(r)} data-testid="remove-rule">
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>

      <div className="panel" data-testid="send-jobs">
        <div className="toolbar">
          <h2>Sent and waiting ({jobs.length})</h2>
        </div>
        {jobs.length === 0 ? (
          <p className="muted">Nothing sent yet. Each send a rule makes is listed here with how it went.</p>
        ) : (
          <table className="grid">
            <thead>
              <tr>
                <th>What</th>
                <th>To</th>
                <th>Rule</th>
                <th>Status</th>
                <th>Attempts</th>
                <th>Next attempt</th>
                <th>Last error</th>
                <th>Made</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {[...jobs].reverse().map((j) => (
                <tr key={j.id} data-send-id={j.id}>
                  <td>
                    {j.object === 'report_sr' ? 'Report SR' : j.object === 'analysis_sr' ? 'Analysis SR' : 'Image'} <span className="mono muted">{j.subject}</span>
                  </td>
                  <td>
                    {peerNames.get(j.peer_id) ?? <span className="muted">removed peer</span>} <span className="muted">{j.method === 'c-store' ? 'C-STORE' : 'STOW-RS'}</span>
                  </td>
                  <td>{j.rule_id ? (ruleNames.get(j.rule_id) ?? <span className="muted">removed rule</span>) : 'by hand'}</td>
                  <td className={j.status === 'failed' || j.status === 'gave_up' ? 'warn' : ''} data-testid="send-status">
                    {STATUS_TEXT[j.status]}
                  </td>
                  <td data-testid="send-attempts">{j.attempts}</td>
                  <td>{j.status === 'failed' || j.status === 'queued' ? dateTime(j.next_attempt_at) : '—'}</td>
                  <td data-testid="send-error">{j.last_error ?? ''}</td>
                  <td>{dateTime(j.created_at)}</td>
                  <td>
                    {j.status === 'failed' || j.status === 'gave_up' ? (
                      <button type="button" onClick={() => retry(j)} data-testid="retry-send">
                        Retry now
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </>
  );
}
