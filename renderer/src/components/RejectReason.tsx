/**
 * Why a finding was rejected (issue 11): the reader may say it under a rejected finding; the
 * server keeps it with the rejection (PATCH /v1/findings/{id} with review rejected and reason)
 * and the report and exports carry it.
 */
import { useState } from 'react';
import type { Client } from '../api/client.ts';
import type { Finding } from '../api/types.ts';

export function RejectReason(props: { client: Client; finding: Finding; onSaved(finding: Finding): void }) {
  const [text, setText] = useState(props.finding.review_reason ?? '');
  const [error, setError] = useState<string | null>(null);
  const saved = (props.finding.review_reason ?? '') === text.trim();
  const save = async () => {
    try {
      const updated = await props.client.patch<Finding>(`/v1/findings/${encodeURIComponent(props.finding.id)}`, {
        body: text.trim() ? { review: 'rejected', reason: text.trim() } : { review: 'rejected' },
      });
      props.onSaved(updated);
      setError(null);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  return (
    <div className="row" onClick={(e) => e.stopPropagation()}>
      <input
        className="grow"
        value={text}
        maxLength={500}
        placeholder="Reason for rejecting (optional)"
        aria-label="Reason for rejecting"
        data-testid="reject-reason"
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          // The viewer's keys (a, r, n...) must not fire while typing.
          e.stopPropagation();
          if (e.key === 'Enter') void save();
        }}
      />
      <button type="button" onClick={() => void save()} disabled={saved} data-testid="save-reject-reason">
        {saved && text ? 'Saved' : 'Save'}
      </button>
      {error ? <span className="error">{error}</span> : null}
    </div>
  );
}
