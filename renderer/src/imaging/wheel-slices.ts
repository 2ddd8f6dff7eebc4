/**
 * How many slices a wheel event moves a stack: one per notch, as readers expect. A notch comes as
 * 100 px (deltaMode pixel; Chromium, so Electron) or 3 lines (deltaMode line; Firefox). Counting
 * events instead of notches loses steps: a renderer whose main thread is busy (decoding frames,
 * a large worklist, a slow machine) gets queued wheel events coalesced into one with their deltas
 * summed, so two quick notches arrive as one event of 200 px. Deltas under a notch (a touchpad's
 * few pixels) still move one slice each, as they always did; floor, not round, so a notch scaled
 * by the display (125 or 150 px) is still one slice.
 */
const PIXELS_PER_NOTCH = 100;
const LINES_PER_NOTCH = 3;
/** A fling or a runaway device moves at most this far in one event. */
const MAX_SLICES = 50;

export function wheelSlices(event: { deltaY: number; deltaMode: number }): number {
  if (!Number.isFinite(event.deltaY) || event.deltaY === 0) return 0;
  const perNotch = event.deltaMode === 1 ? LINES_PER_NOTCH : event.deltaMode === 2 ? 1 : PIXELS_PER_NOTCH;
  const notches = Math.max(1, Math.floor(Math.abs(event.deltaY) / perNotch));
  return Math.sign(event.deltaY) * Math.min(notches, MAX_SLICES);
}
