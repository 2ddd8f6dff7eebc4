/**
 * A PNG encoder for 8-bit grey and RGB images (ISO/IEC 15948: signature, IHDR, IDAT, IEND, each
 * chunk with a CRC-32). Rows use the Up filter, which suits smooth medical images well.
 */
import { crc32, deflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

export function encodePng(pixels: Uint8Array, width: number, height: number, channels: 1 | 3): Buffer {
  if (pixels.length !== width * height * channels) throw new Error(`PNG: ${pixels.length} samples for ${width}x${height}x${channels}`);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = channels === 1 ? 0 : 2; // colour type: greyscale or truecolour
  // compression 0, filter method 0, no interlace
  const stride = width * channels;
  const filtered = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y++) {
    const at = y * (stride + 1);
    const row = y * stride;
    if (y === 0) {
      filtered[at] = 0; // None
      filtered.set(pixels.subarray(row, row + stride), at + 1);
      continue;
    }
    filtered[at] = 2; // Up: difference to the row above (PNG spec 9.2)
    const prev = row - stride;
    for (let x = 0; x < stride; x++) filtered[at + 1 + x] = ((pixels[row + x] ?? 0) - (pixels[prev + x] ?? 0)) & 0xff;
  }
  return Buffer.concat([SIGNATURE, chunk('IHDR', header), chunk('IDAT', deflateSync(filtered, { level: 6 })), chunk('IEND', Buffer.alloc(0))]);
}
