/**
 * A small sequential-DCT JPEG decoder (ITU-T T.81 processes 1, 2 and 4: Huffman coding,
 * 8- or 12-bit samples) for DICOM's JPEG Extended syntax 1.2.840.10008.1.2.4.51, which
 * libjpeg-turbo's 8-bit build cannot decode. Written for this project from the T.81 text.
 * Results are within a few grey levels of libjpeg/dcmtk (float IDCT, nearest-neighbour
 * chroma upsampling), which is acceptable because the syntax is lossy anyway.
 */
import { maskStoredBits, type DecodedFrame, type FrameGeometry } from '#server/dicom/pixel-types.ts';

// T.81 Figure A.6: position in the 8x8 block of the k-th coefficient in zig-zag order.
const ZIGZAG = Uint8Array.from([
  0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42,
  49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
]);

// COS[x*8+u] = C(u)/2 * cos((2x+1)u*pi/16), so a 1-D IDCT is a dot product (T.81 A.3.3).
const COS = new Float64Array(64);
for (let x = 0; x < 8; x++) {
  for (let u = 0; u < 8; u++) COS[x * 8 + u] = (u === 0 ? Math.SQRT1_2 : 1) * 0.5 * Math.cos(((2 * x + 1) * u * Math.PI) / 16);
}

type Huffman = { maxCode: Int32Array; valPtr: Int32Array; minCode: Int32Array; values: Uint8Array };

type Component = { id: number; h: number; v: number; tq: number; blocksPerLine: number; blocksPerColumn: number; plane: Float32Array; pred: number; dc: number; ac: number };

function buildHuffman(counts: Uint8Array, values: Uint8Array): Huffman {
  // T.81 Annex C and F.2.2.3: canonical codes, decoded by code length.
  const maxCode = new Int32Array(18).fill(-1);
  const valPtr = new Int32Array(17);
  const minCode = new Int32Array(17);
  let code = 0;
  let k = 0;
  for (let len = 1; len <= 16; len++) {
    const n = counts[len - 1] ?? 0;
    valPtr[len] = k;
    minCode[len] = code;
    code += n;
    k += n;
    maxCode[len] = n > 0 ? code - 1 : -1;
    code <<= 1;
  }
  return { maxCode, valPtr, minCode, values };
}

class BitReader {
  pos: number;
  private bits = 0;
  private count = 0;
  constructor(private readonly data: Uint8Array, start: number) {
    this.pos = start;
  }
  bit(): number {
    if (this.count === 0) {
      const b = this.data[this.pos];
      if (b === undefined) throw new Error('JPEG entropy data ends early');
      if (b === 0xff) {
        const next = this.data[this.pos + 1];
        // A marker inside the scan means the data ran short; T.81 F.2.2.5 pads with zeros.
        if (next === 0x00) this.pos += 2;
        else return 0;
      } else {
        this.pos += 1;
      }
      this.bits = b;
      this.count = 8;
    }
    this.count--;
    return (this.bits >> this.count) & 1;
  }
  receive(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) v = (v << 1) | this.bit();
    return v;
  }
  decode(h: Huffman): number {
    let code = 0;
    for (let len = 1; len <= 16; len++) {
      code = (code << 1) | this.bit();
      if (code <= (h.maxCode[len] ?? -1)) return h.values[(h.valPtr[len] ?? 0) + code - (h.minCode[len] ?? 0)] ?? 0;
    }
    throw new Error('invalid Huffman code in JPEG data');
  }
  /** Byte-aligns and consumes an RSTn marker if one follows (T.81 F.2.2.5). */
  restart(): void {
    this.count = 0;
    while (this.pos + 1 < this.data.length && !(this.data[this.pos] === 0xff && (this.data[this.pos + 1] ?? 0) >= 0xd0 && (this.data[this.pos + 1] ?? 0) <= 0xd7)) {
      if (this.data[this.pos] === 0xff && this.data[this.pos + 1] !== 0x00) return;
      this.pos++;
    }
    this.pos += 2;
  }
}

const extend = (v: number, t: number): number => (t === 0 ? 0 : v < 1 << (t - 1) ? v - (1 << t) + 1 : v);

function idctBlock(coef: Float64Array, out: Float32Array, stride: number, at: number, shift: number): void {
  const tmp = new Float64Array(64);
  for (let y = 0; y < 8; y++) {
    for (let x = 0; x < 8; x++) {
      let s = 0;
      for (let u = 0; u < 8; u++) s += (COS[x * 8 + u] ?? 0) * (coef[y * 8 + u] ?? 0);
      tmp[y * 8 + x] = s;
    }
  }
  for (let x = 0; x < 8; x++) {
    for (let y = 0; y < 8; y++) {
      let s = 0;
      for (let v = 0; v < 8; v++) s += (COS[y * 8 + v] ?? 0) * (tmp[v * 8 + x] ?? 0);
      out[at + y * stride + x] = s + shift;
    }
  }
}

export function decodeJpegDct(data: Uint8Array, g: FrameGeometry): DecodedFrame {
  if (data[0] !== 0xff || data[1] !== 0xd8) throw new Error('JPEG data does not start with SOI');
  const quant = new Map<number, Int32Array>();
  const dcTables = new Map<number, Huffman>();
  const acTables = new Map<number, Huffman>();
  let components: Component[] = [];
  let precision = 8;
  let width = 0;
  let height = 0;
  let hMax = 1;
  let vMax = 1;
  let mcusX = 0;
  let mcusY = 0;
  let restartInterval = 0;
  let adobeOrJfif = false;
  let pos = 2;
  const u16 = (at: number): number => ((data[at] ?? 0) << 8) | (data[at + 1] ?? 0);

  while (pos + 4 <= data.length) {
    if (data[pos] !== 0xff) {
      pos++;
      continue;
    }
    const marker = data[pos + 1] ?? 0;
    if (marker === 0xd9) break;
    if (marker === 0xff || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      pos += marker === 0xff ? 1 : 2;
      continue;
    }
    const len = u16(pos + 2);
    const seg = pos + 4;
    const segEnd = pos + 2 + len;
    if (len < 2 || segEnd > data.length) throw new Error(`JPEG marker FF${marker.toString(16).toUpperCase()} runs past the end`);
    if (marker === 0xe0 || marker === 0xee) adobeOrJfif = true;
    if (marker === 0xdb) {
      for (let p = seg; p < segEnd; ) {
        const pq = (data[p] ?? 0) >> 4;
        const tq = (data[p] ?? 0) & 15;
        p++;
        const table = new Int32Array(64);
        for (let k = 0; k < 64; k++) {
          table[k] = pq ? u16(p + k * 2) : (data[p + k] ?? 0);
        }
        p += pq ? 128 : 64;
        quant.set(tq, table);
      }
    } else if (marker === 0xc4) {
      for (let p = seg; p < segEnd; ) {
        const tc = (data[p] ?? 0) >> 4;
        const th = (data[p] ?? 0) & 15;
        const counts = data.slice(p + 1, p + 17);
        const total = counts.reduce((a, b) => a + b, 0);
        const values = data.slice(p + 17, p + 17 + total);
        p += 17 + total;
        (tc === 0 ? dcTables : acTables).set(th, buildHuffman(counts, values));
      }
    } else if (marker === 0xc0 || marker === 0xc1) {
      precision = data[seg] ?? 8;
      height = u16(seg + 1);
      width = u16(seg + 3);
      const n = data[seg + 5] ?? 0;
      if (width === 0 || height === 0 || n === 0 || n > 4) throw new Error(`unsupported JPEG frame ${width}x${height}x${n}`);
      const raw = [];
      for (let c = 0; c < n; c++) {
        const b = seg + 6 + c * 3;
        raw.push({ id: data[b] ?? 0, h: Math.max(1, (data[b + 1] ?? 0) >> 4), v: Math.max(1, (data[b + 1] ?? 0) & 15), tq: data[b + 2] ?? 0 });
      }
      hMax = Math.max(...raw.map((c) => c.h));
      vMax = Math.max(...raw.map((c) => c.v));
      mcusX = Math.ceil(width / (8 * hMax));
      mcusY = Math.ceil(height / (8 * vMax));
      components = raw.map((c) => {
        const blocksPerLine = mcusX * c.h;
        const blocksPerColumn = mcusY * c.v;
        return { ...c, blocksPerLine, blocksPerColumn, plane: new Float32Array(blocksPerLine * blocksPerColumn * 64), pred: 0, dc: 0, ac: 0 };
      });
    } else if (marker >= 0xc2 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      throw new Error(`unsupported JPEG process (SOF marker FF${marker.toString(16).toUpperCase()})`);
    } else if (marker === 0xdd) {
      restartInterval = u16(seg);
    } else if (marker === 0xda) {
      if (components.length === 0) throw new Error('JPEG scan before frame header');
      const ns = data[seg] ?? 0;
      const scan: Component[] = [];
      for (let i = 0; i < ns; i++) {
        const id = data[seg + 1 + i * 2] ?? 0;
        const sel = data[seg + 2 + i * 2] ?? 0;
        const comp = components.find((c) => c.id === id);
        if (!comp) throw new Error(`JPEG scan names unknown component ${id}`);
        comp.dc = sel >> 4;
        comp.ac = sel & 15;
        scan.push(comp);
      }
      pos = decodeScan(data, segEnd, scan, { dcTables, acTables, quant, mcusX, mcusY, restartInterval, precision, width, height, hMax, vMax });
      continue;
    }
    pos = segEnd;
  }
  if (components.length === 0) throw new Error('JPEG has no frame header');
  if (width !== g.columns || height !== g.rows) throw new Error(`JPEG is ${width}x${height}, DICOM says ${g.columns}x${g.rows}`);
  if (components.length !== g.samplesPerPixel) throw new Error(`JPEG has ${components.length} components, DICOM says ${g.samplesPerPixel}`);

  const max = 2 ** precision - 1;
  const n = components.length;
  const out = precision > 8 || g.bitsAllocated > 8 ? new Uint16Array(width * height * n) : new Uint8Array(width * height * n);
  const toRgb = n === 3 && (adobeOrJfif || g.photometricInterpretation.startsWith('YBR_FULL'));
  const half = 2 ** (precision - 1);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const s: number[] = components.map((c) => {
        const cx = Math.floor((x * c.h) / hMax);
        const cy = Math.floor((y * c.v) / vMax);
        return c.plane[cy * c.blocksPerLine * 8 + cx] ?? 0;
      });
      if (toRgb) {
        // T.871 / PS3.3 C.7.6.3.1.2 YBR_FULL to RGB.
        const [yy = 0, cb = 0, cr = 0] = s;
        s[0] = yy + 1.402 * (cr - half);
        s[1] = yy - 0.344136 * (cb - half) - 0.714136 * (cr - half);
        s[2] = yy + 1.772 * (cb - half);
      }
      for (let c = 0; c < n; c++) out[(y * width + x) * n + c] = Math.min(max, Math.max(0, Math.round(s[c] ?? 0)));
    }
  }
  return {
    pixels: maskStoredBits(out, g),
    rows: height,
    columns: width,
    samplesPerPixel: n,
    photometricInterpretation: toRgb ? 'RGB' : g.photometricInterpretation,
    bitsStored: g.bitsStored,
    pixelRepresentation: g.pixelRepresentation,
  };
}

type ScanContext = {
  dcTables: Map<number, Huffman>;
  acTables: Map<number, Huffman>;
  quant: Map<number, Int32Array>;
  mcusX: number;
  mcusY: number;
  restartInterval: number;
  precision: number;
  width: number;
  height: number;
  hMax: number;
  vMax: number;
};

function decodeScan(data: Uint8Array, start: number, scan: Component[], ctx: ScanContext): number {
  const reader = new BitReader(data, start);
  const coef = new Float64Array(64);
  const shift = 2 ** (ctx.precision - 1);
  for (const c of scan) c.pred = 0;
  const decodeBlock = (c: Component, row: number, col: number): void => {
    const dc = ctx.dcTables.get(c.dc);
    const ac = ctx.acTables.get(c.ac);
    const q = ctx.quant.get(c.tq);
    if (!dc || !ac || !q) throw new Error('JPEG scan uses a missing Huffman or quantisation table');
    coef.fill(0);
    const t = reader.decode(dc);
    c.pred += extend(reader.receive(t), t);
    coef[0] = c.pred * (q[0] ?? 1);
    for (let k = 1; k < 64; ) {
      const rs = reader.decode(ac);
      const s = rs & 15;
      const r = rs >> 4;
      if (s === 0) {
        if (r !== 15) break;
        k += 16;
        continue;
      }
      k += r;
      if (k > 63) throw new Error('JPEG AC coefficient index past 63');
      coef[ZIGZAG[k] ?? 0] = extend(reader.receive(s), s) * (q[k] ?? 1);
      k++;
    }
    if (row >= c.blocksPerColumn || col >= c.blocksPerLine) return;
    const stride = c.blocksPerLine * 8;
    idctBlock(coef, c.plane, stride, row * 8 * stride + col * 8, shift);
  };
  const single = scan.length === 1;
  const only = scan[0];
  // T.81 A.2.2: a single-component scan covers that component's own block grid, not MCUs.
  const perLine = only ? Math.ceil(Math.ceil((ctx.width * only.h) / ctx.hMax) / 8) : 0;
  const perColumn = only ? Math.ceil(Math.ceil((ctx.height * only.v) / ctx.vMax) / 8) : 0;
  const total = single ? perLine * perColumn : ctx.mcusX * ctx.mcusY;
  for (let m = 0; m < total; m++) {
    if (ctx.restartInterval > 0 && m > 0 && m % ctx.restartInterval === 0) {
      reader.restart();
      for (const c of scan) c.pred = 0;
    }
    if (single && only) {
      decodeBlock(only, Math.floor(m / perLine), m % perLine);
    } else {
      const mr = Math.floor(m / ctx.mcusX);
      const mc = m % ctx.mcusX;
      for (const c of scan) {
        for (let v = 0; v < c.v; v++) for (let h = 0; h < c.h; h++) decodeBlock(c, mr * c.v + v, mc * c.h + h);
      }
    }
  }
  // Resume marker parsing after the entropy-coded data.
  let p = reader.pos;
  while (p + 1 < data.length && !(data[p] === 0xff && data[p + 1] !== 0x00 && !((data[p + 1] ?? 0) >= 0xd0 && (data[p + 1] ?? 0) <= 0xd7))) p++;
  return p;
}
