/**
 * The Emscripten codecs (WASM inside the npm packages), loaded lazily once per process: each
 * costs tens of milliseconds and some megabytes to instantiate, and most imports need none.
 * Each factory gets its own options object (a shared one is mutated by Emscripten), with
 * print/printErr silenced because OpenJPEG logs [INFO] lines for every decode.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export type FrameInfo = { width: number; height: number; bitsPerSample: number; componentCount: number; isSigned: boolean };

export type WasmDecoder = {
  getEncodedBuffer(length: number): Uint8Array;
  getDecodedBuffer(): Uint8Array;
  decode(): void;
  getFrameInfo(): FrameInfo;
  delete(): void;
  getInterleaveMode?(): number;
};

type DecoderClass = new () => WasmDecoder;

type CodecSpec = { module: string; className: string };

export const CODECS = {
  jpegBaseline: { module: '@cornerstonejs/codec-libjpeg-turbo-8bit/decodewasmjs', className: 'JPEGDecoder' },
  jpegLs: { module: '@cornerstonejs/codec-charls/decodewasmjs', className: 'JpegLSDecoder' },
  jpeg2000: { module: '@cornerstonejs/codec-openjpeg/decodewasmjs', className: 'J2KDecoder' },
  htj2k: { module: '@cornerstonejs/codec-openjph', className: 'HTJ2KDecoder' },
} as const satisfies Record<string, CodecSpec>;

export type CodecName = keyof typeof CODECS;

/** Holds the one instantiated module per codec; state with a lifetime, hence a class. */
class CodecCache {
  readonly #loading = new Map<CodecName, Promise<DecoderClass>>();

  get(name: CodecName): Promise<DecoderClass> {
    let p = this.#loading.get(name);
    if (!p) {
      p = load(CODECS[name]);
      // A failed load must not poison the cache forever.
      p.catch(() => this.#loading.delete(name));
      this.#loading.set(name, p);
    }
    return p;
  }
}

async function load(spec: CodecSpec): Promise<DecoderClass> {
  const factory: unknown = require(spec.module);
  if (typeof factory !== 'function') throw new Error(`${spec.module} does not export an Emscripten factory`);
  const options = { print: (_: string): void => {}, printErr: (_: string): void => {} };
  const mod: unknown = await (factory as (o: typeof options) => Promise<unknown>)(options);
  if (typeof mod !== 'object' || mod === null) throw new Error(`${spec.module} did not initialise`);
  const ctor: unknown = (mod as Record<string, unknown>)[spec.className];
  if (typeof ctor !== 'function') throw new Error(`${spec.module} has no ${spec.className}`);
  return ctor as DecoderClass;
}

const cache = new CodecCache();

export type WasmDecoded = { data: Uint8Array; info: FrameInfo; interleaveMode: number | null };

/** Runs one decode and copies the result out of WASM memory before freeing the decoder. */
export async function decodeWithWasm(name: CodecName, encoded: Uint8Array): Promise<WasmDecoded> {
  const Decoder = await cache.get(name);
  const decoder = new Decoder();
  try {
    decoder.getEncodedBuffer(encoded.length).set(encoded);
    decoder.decode();
    const info = decoder.getFrameInfo();
    const data = decoder.getDecodedBuffer().slice();
    const interleaveMode = decoder.getInterleaveMode ? decoder.getInterleaveMode() : null;
    return { data, info: { ...info }, interleaveMode };
  } finally {
    decoder.delete();
  }
}
