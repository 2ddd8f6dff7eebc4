/** Loading, empty and error states: each says what is happening and what to do next. */
import type { ReactNode } from 'react';
import { ApiError } from '../api/client.ts';
import { errorText } from '../format.ts';

export function Loading({ what }: { what: string }) {
  return (
    <div className="state state-loading" role="status">
      <span className="spinner" aria-hidden="true" /> Loading {what}…
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="state state-empty">
      <h3>{title}</h3>
      {children ? <p>{children}</p> : null}
    </div>
  );
}

/**
 * 422 (and 415) refuse the content itself - a stored frame that cannot be decoded, a file that is
 * not DICOM - so asking again gets the same answer: no Retry is offered for them (issue 11).
 */
export function retryCanHelp(error: unknown): boolean {
  return !(error instanceof ApiError && (error.info.status === 422 || error.info.status === 415));
}

function nextStep(error: unknown): string {
  if (!retryCanHelp(error)) return 'Retrying will not change this: the stored data itself cannot be processed. Re-import it from the original files.';
  if (error instanceof ApiError) {
    const status = error.info.status;
    if (status === 0) return 'Start the mia server (npm start) and press Retry.';
    if (status === 403) return 'Your key lacks the scope named above; ask an admin to grant it.';
    if (status === 404) return 'It may have been archived or removed; go back to the worklist.';
    if (status === 429) return 'The server is busy; wait a moment and press Retry.';
    if (status >= 500) return 'Press Retry; if it persists, send the request id to support.';
  }
  return 'Press Retry.';
}

export function ErrorState({ error, retry }: { error: unknown; retry?: () => void }) {
  return (
    <div className="state state-error" role="alert">
      <p className="error-text">{errorText(error)}</p>
      <p>{nextStep(error)}</p>
      {retry && retryCanHelp(error) ? (
        <button type="button" onClick={retry}>
          Retry
        </button>
      ) : null}
    </div>
  );
}

export function InlineError({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="inline-error" role="alert">
      {errorText(error)}
    </p>
  );
}
