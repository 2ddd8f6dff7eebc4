/**
 * Enhanced CT (or MR) multi-frame files built from classic phantom series (enhanced_ct.py): the same
 * stored pixels, with rescale, spacing, position, orientation and window only in the
 * functional groups (PS3.3 C.7.6.16).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export const ENHANCED_CT_SCRIPT = join(import.meta.dirname, 'enhanced_ct.py');

export type EnhancedCt = { series_uid: string; instance_uid: string; frames: number; classic: string[] };

export type EnhancedOptions = { perFrameIntercept?: boolean; dropLastItem?: boolean; interleave?: boolean; tiltFrame?: boolean; slope?: number };

/** `classic` in the result names the classic slice each frame was made from, in frame order. */
export function enhancedCt(classicDir: string, out: string, options: EnhancedOptions = {}): EnhancedCt {
  const args = [ENHANCED_CT_SCRIPT, classicDir, out];
  if (options.perFrameIntercept) args.push('--per-frame-intercept');
  if (options.dropLastItem) args.push('--drop-last-item');
  if (options.interleave) args.push('--interleave');
  if (options.tiltFrame) args.push('--tilt-frame');
  if (options.slope !== undefined) args.push('--slope', String(options.slope));
  return JSON.parse(execFileSync('/usr/bin/python3', args, { encoding: 'utf8', timeout: 120_000 })) as EnhancedCt;
}
