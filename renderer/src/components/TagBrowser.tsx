/**
 * The DICOM tag browser: the top-level tags of the instance on screen (GET
 * /v1/instances/{uid}/tags), filtered by tag, name or value. Values include PHI; the server
 * audits each read, so the list is fetched only when the reader opens the browser.
 */
import { useState } from 'react';
import { useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import { ErrorState, Loading } from './StateMessage.tsx';

type TagEntry = { tag: string; vr: string | null; name: string | null; length: number; value: string | null };
type InstanceTags = { instance_uid: string; tags: TagEntry[] };

export function TagBrowser({ instanceUid, onClose }: { instanceUid: string; onClose(): void }) {
  const { client } = useSession();
  const [filter, setFilter] = useState('');
  const loaded = useLoad((signal) => client.get<InstanceTags>(`/v1/instances/${encodeURIComponent(instanceUid)}/tags`, { signal }), [client, instanceUid]);
  const needle = filter.trim().toLowerCase();
  return (
    <div className="tag-browser" role="dialog" aria-label="DICOM tags" data-testid="tag-browser">
      <div className="tag-browser-bar">
        <strong>DICOM tags</strong>
        <input value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="Filter by tag, name or value" aria-label="Filter tags" data-testid="tag-filter" autoFocus />
        <button type="button" onClick={onClose} data-testid="tag-close">
          Close
        </button>
      </div>
      {loaded.state === 'loading' ? <Loading what="tags" /> : null}
      {loaded.state === 'error' ? <ErrorState error={loaded.error} retry={loaded.reload} /> : null}
      {loaded.state === 'ready' ? (
        <div className="tag-browser-table">
          <table>
            <thead>
              <tr>
                <th>Tag</th>
                <th>VR</th>
                <th>Name</th>
                <th>Value</th>
              </tr>
            </thead>
            <tbody>
              {loaded.value.tags
                .filter((t) => needle === '' || [t.tag, t.name ?? '', t.value ?? ''].some((s) => s.toLowerCase().includes(needle)))
                .map((t, i) => (
                  <tr key={`${t.tag}-${i}`} data-testid="tag-row" data-tag={t.tag}>
                    <td className="mono">{t.tag}</td>
                    <td>{t.vr ?? ''}</td>
                    <td>{t.name ?? ''}</td>
                    <td className="mono">{t.value ?? <span className="muted">{`(${t.length} bytes)`}</span>}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </div>
  );
}
