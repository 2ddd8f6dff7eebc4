/**
 * Loads the raw arrays pydicom wrote and compares them with our decoded frames.
 */
import { readFileSync } from 'node:fs';
import { parseDicom, type DicomInstance } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';

export type PydicomPixels = { file: string; error?: string; raw?: string; dtype?: string; shape?: number[]; photometric?: string };

type Numeric = ArrayLike<number>;

function typed(raw: Uint8Array, dtype: string): Numeric {
  const b = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
  switch (dtype) {
    case 'uint8': return new Uint8Array(b);
    case 'int8': return new Int8Array(b);
    case 'uint16': return new Uint16Array(b);
    case 'int16': return new Int16Array(b);
    case 'uint32': return new Uint32Array(b);
    case 'int32': return new Int32Array(b);
    case 'float32': return new Float32Array(b);
    case 'float64': return new Float64Array(b);
    case 'bool': return new Uint8Array(b);
    default: throw new Error(`unexpected dtype ${dtype}`);
  }
}

export type FrameDiff = { maxAbs: number; meanAbs: number; photometric: string; refPhotometric: string };

export async function diffAgainstReference(file: string, ref: PydicomPixels): Promise<{ instance: DicomInstance; frames: FrameDiff[] }> {
  if (ref.error || !ref.raw || !ref.dtype || !ref.shape) throw new Error(`pydicom could not decode ${file}: ${ref.error ?? 'no output'}`);
  const bytes = new Uint8Array(readFileSync(file));
  const parsed = parseDicom(bytes);
  if (!parsed.ok) throw new Error(`${file}: ${parsed.reason}`);
  const instance = parsed.instance;
  const all = typed(new Uint8Array(readFileSync(ref.raw)), ref.dtype);
  const [frames = 1, rows = 0, cols = 0, samples = 1] = ref.shape;
  const perFrame = rows * cols * samples;
  const out: FrameDiff[] = [];
  for (let f = 0; f < frames; f++) {
    const d = await decodeFrame(bytes, instance, f);
    if (d.rows !== rows || d.columns !== cols || d.samplesPerPixel !== samples) {
      throw new Error(`${file} frame ${f}: we decode ${d.rows}x${d.columns}x${d.samplesPerPixel}, pydicom ${rows}x${cols}x${samples}`);
    }
    let maxAbs = 0;
    let sum = 0;
    for (let i = 0; i < perFrame; i++) {
      const diff = Math.abs((d.pixels[i] ?? 0) - (all[f * perFrame + i] ?? 0));
      if (diff > maxAbs) maxAbs = diff;
      sum += diff;
    }
    out.push({ maxAbs, meanAbs: sum / perFrame, photometric: d.photometricInterpretation, refPhotometric: ref.photometric ?? '' });
  }
  return { instance, frames: out };
}
