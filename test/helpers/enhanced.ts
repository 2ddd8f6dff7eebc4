/**
 * Enhanced CT (or MR) multi-frame files built from classic phantom series (enhanced_ct.py): the same
 * stored pixels, with rescale, spacing, position, orientation and window only in the
 * functional groups (PS3.3 C.7.6.16).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

export const ENHANCED_CT_SCRIPT = join(import.meta.dirname, 'enhanced_ct.py');

/**
 * A real Philips Enhanced MR (176 frames) from nibabel's test data (Debian python3-nibabel,
 * scripts/system-deps.sh): Rescale Slope 2.1079365079365 only in each frame's Pixel Value
 * Transformation, spacing, position, orientation and window only in the functional groups.
 */
export const PHILIPS_MPRAGE_GZ = '/usr/lib/python3/dist-packages/nibabel/nicom/tests/data/philips_mprage.dcm.gz';

export function philipsMprage(): Uint8Array {
  if (!existsSync(PHILIPS_MPRAGE_GZ)) throw new Error(`${PHILIPS_MPRAGE_GZ} not found: apt-get install python3-nibabel (scripts/system-deps.sh)`);
  return new Uint8Array(gunzipSync(readFileSync(PHILIPS_MPRAGE_GZ)));
}

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
