/**
 * Shape checks for JSON that mia wrote into its own store (instance spacing and frame values,
 * an analysis' thresholds and triage labels), read defensively because older versions wrote
 * other shapes. Written by hand, not with zod: these run in every export worker thread, where
 * loading zod and the API's schemas for them was ~6 MB of each thread's 12.5 MB heap at start.
 * Request bodies and queries are still checked by the API's zod schemas at the edge.
 */

export const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

export const isString = (value: unknown): value is string => typeof value === 'string';

/** A plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An array of exactly `length` numbers. */
export function isNumbers<N extends number>(value: unknown, length: N): value is number[] & { length: N } {
  return Array.isArray(value) && value.length === length && value.every(isNumber);
}

export const isNumberPair = (value: unknown): value is [number, number] => isNumbers(value, 2);

export const orNull =
  <T>(check: (value: unknown) => value is T) =>
  (value: unknown): value is T | null =>
    value === null || check(value);

/** One of `values`. */
export const isOneOf =
  <T extends string>(values: readonly T[]) =>
  (value: unknown): value is T =>
    typeof value === 'string' && (values as readonly string[]).includes(value);

/** An object whose every value passes `check`. */
export function isRecordOf<T>(value: unknown, check: (value: unknown) => value is T): value is Record<string, T> {
  return isRecord(value) && Object.values(value).every(check);
}

/** `text` parsed when it is JSON of the shape `check` accepts, else null. */
export function parsedAs<T>(text: string, check: (value: unknown) => value is T): T | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return check(value) ? value : null;
}
