/**
 * The one error type of mia. Domain code says what went wrong in its own terms (a kind and a
 * message); the HTTP edge maps kinds to status codes in exactly one place (http/error-mapping).
 */
export type ErrorKind =
  | 'invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'not_acceptable'
  | 'conflict'
  | 'too_large'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'rate_limited'
  /** The client speaks a protocol version this server does not (sync): 426, naming the version. */
  | 'upgrade_required'
  | 'internal'
  /** The disk holding the data folder is full (or over quota): nothing more fits. */
  | 'insufficient_storage'
  /** The disk holding the data folder failed an operation (an I/O error, read-only). */
  | 'storage_failure';

export class MiaError extends Error {
  readonly kind: ErrorKind;
  /** Technical detail or a fix suggestion, e.g. the required scope or the field at fault. */
  readonly details: string | undefined;
  /** Seconds a client should wait before retrying (rate limits). */
  readonly retryAfterSeconds: number | undefined;

  constructor(kind: ErrorKind, message: string, details?: string, retryAfterSeconds?: number) {
    super(message);
    this.name = 'MiaError';
    this.kind = kind;
    this.details = details;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export const invalid = (message: string, details?: string): MiaError => new MiaError('invalid', message, details);
export const notFound = (what: string, id: string): MiaError =>
  new MiaError('not_found', `${what} not found`, `no ${what.toLowerCase()} with id ${id}`);
export const conflict = (message: string, details?: string): MiaError => new MiaError('conflict', message, details);
export const forbidden = (message: string, details?: string): MiaError => new MiaError('forbidden', message, details);
