/** A key shown once, with a copy button: a new or rotated API key, or a workstation's device key. */
import { useState } from 'react';
import { dateTime } from '../format.ts';

export type Secret = { kind: 'created' | 'rotated' | 'device'; key: string; keyId: string; oldKeyId?: string; oldExpiresAt?: string };

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Electron denies every permission request (main/window-options.ts), clipboard included;
    // the legacy copy command needs no permission.
    const area = document.createElement('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}

export function SecretNotice({ secret, onClose }: { secret: Secret; onClose(): void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="secret" data-testid={secret.kind === 'rotated' ? 'rotated-key' : 'created-key'} data-expires-at={secret.oldExpiresAt ?? ''}>
      <strong>
        {secret.kind === 'rotated' ? `New key ${secret.keyId}` : secret.kind === 'device' ? `Device key of ${secret.keyId}` : `Key ${secret.keyId} created`} — copy it now, it is not shown
        again:
      </strong>
      <code data-testid="new-key">{secret.key}</code>
      {secret.oldExpiresAt ? (
        <span>
          The old key {secret.oldKeyId} keeps working until <b>{dateTime(secret.oldExpiresAt)}</b> ({secret.oldExpiresAt}), then stops working.
        </span>
      ) : null}
      <div className="form-row">
        <button type="button" className="primary" onClick={() => void copyText(secret.key).then(setCopied)} data-testid="copy-key">
          {copied ? 'Copied' : 'Copy key'}
        </button>
        <button type="button" onClick={onClose}>
          I have stored it
        </button>
      </div>
    </div>
  );
}
