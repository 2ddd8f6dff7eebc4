/** Checks of the export form, explained before the server would answer with a 400. */

/** Null when the minimum confidence is empty (no filter) or a number from 0 to 1. */
export function minConfidenceProblem(text: string): string | null {
  const value = text.trim();
  if (value === '') return null;
  // Plain decimals only: Number() also takes '0x1', '1e-1' and Infinity, which nobody means here.
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(value)) return `Minimum confidence must be a number from 0 to 1 (e.g. 0.5); "${value}" is not.`;
  const number = Number(value);
  if (number < 0 || number > 1) return `Minimum confidence must be from 0 to 1 (confidences are fractions: 0.5 is 50%); ${value} is outside.`;
  return null;
}
