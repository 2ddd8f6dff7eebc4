/**
 * Decodes text values (PN, LO, SH, ...) under Specific Character Set (0008,0005), PS3.3
 * C.12.1.1.2 and PS3.5 Section 6.1. Without the attribute the default repertoire is ASCII
 * (ISO-IR 6); we decode such bytes as latin1 so a mislabelled file still yields readable text
 * instead of replacement characters.
 */

// WHATWG TextDecoder labels for the single-byte and multi-byte sets PS3.3 Table C.12-2/-4
// names. ISO_IR 100 is decoded by hand below: the WHATWG "latin1" label means windows-1252,
// which differs from ISO 8859-1 in 0x80-0x9F.
const DECODER_LABELS: Readonly<Record<string, string>> = {
  ISO_IR_101: 'iso-8859-2',
  ISO_IR_109: 'iso-8859-3',
  ISO_IR_110: 'iso-8859-4',
  ISO_IR_144: 'iso-8859-5',
  ISO_IR_127: 'iso-8859-6',
  ISO_IR_126: 'iso-8859-7',
  ISO_IR_138: 'iso-8859-8',
  ISO_IR_148: 'windows-1254',
  ISO_IR_166: 'windows-874',
  ISO_IR_13: 'shift_jis',
  ISO_IR_192: 'utf-8',
  GB18030: 'gb18030',
  GBK: 'gbk',
  ISO_2022_IR_101: 'iso-8859-2',
  ISO_2022_IR_109: 'iso-8859-3',
  ISO_2022_IR_110: 'iso-8859-4',
  ISO_2022_IR_144: 'iso-8859-5',
  ISO_2022_IR_127: 'iso-8859-6',
  ISO_2022_IR_126: 'iso-8859-7',
  ISO_2022_IR_138: 'iso-8859-8',
  ISO_2022_IR_148: 'windows-1254',
  ISO_2022_IR_166: 'windows-874',
  ISO_2022_IR_13: 'shift_jis',
};

/** ISO 8859-1 (Node's 'latin1' is the real one, not windows-1252), natively. */
export function decodeLatin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

function decodeWith(label: string, bytes: Uint8Array): string {
  try {
    return new TextDecoder(label).decode(bytes);
  } catch {
    return decodeLatin1(bytes);
  }
}

// ISO 2022 escape sequences (PS3.5 6.1.2.5.3) that switch code elements inside a value.
const ESCAPES = /\x1b(\$\)C|\$B|\$\(D|\(B|\(J|-[A-Za-z]|\$\)A|\$\)G)/g;

/**
 * `charset` is the raw (0008,0005) value, possibly multi-valued with backslashes.
 * Code extensions (ISO 2022) are handled for the cases seen in practice: Japanese (IR 87 /
 * IR 159, decoded as ISO-2022-JP, which understands the same escapes), Korean (IR 149, the
 * G1 set is EUC-KR once the designator is removed) and single-byte G1 switches. Other
 * combinations fall back to the first single-byte set after stripping escapes.
 */
export function decodeText(bytes: Uint8Array, charset: string | undefined): string {
  return textDecoderFor(charset)(bytes);
}

/**
 * Decoders by Specific Character Set: a folder of a few series shares one or two, and parsing
 * the set anew for each file was ~14 us of an import's ~500 us a file on the event loop (CPU
 * profile, 2,000 files). The value comes from files, so only short ones are kept, and few.
 */
const decoders = new Map<string, (bytes: Uint8Array) => string>();
const MAX_DECODERS = 32;
const MAX_KEPT_CHARSET = 128;

/** The decoder for one data set's Specific Character Set, parsed once for all its values. */
export function textDecoderFor(charset: string | undefined): (bytes: Uint8Array) => string {
  const key = charset ?? '';
  const known = decoders.get(key);
  if (known) return known;
  const decoder = decoderFor(key);
  if (key.length <= MAX_KEPT_CHARSET) {
    if (decoders.size >= MAX_DECODERS) decoders.clear();
    decoders.set(key, decoder);
  }
  return decoder;
}

function decoderFor(charset: string): (bytes: Uint8Array) => string {
  const terms = charset
    .split('\\')
    .map((t) => t.trim().replace(/ /g, '_'));
  const has = (t: string): boolean => terms.includes(t);
  if (has('ISO_2022_IR_87') || has('ISO_2022_IR_159')) return (bytes) => decodeWith('iso-2022-jp', bytes);
  if (has('ISO_2022_IR_149')) {
    return (bytes) => {
      const text = decodeLatin1(bytes).replace(ESCAPES, '');
      return decodeWith('euc-kr', Uint8Array.from(text, (c) => c.charCodeAt(0)));
    };
  }
  const first = terms.find((t) => t.length > 0);
  // A multi-valued set with an empty first value means "ASCII, then extensions" (C.12.1.1.2).
  const chosen = first ?? 'ISO_IR_6';
  const latin1 = chosen === 'ISO_IR_6' || chosen === 'ISO_2022_IR_6' || chosen === 'ISO_IR_100' || chosen === 'ISO_2022_IR_100';
  const label = latin1 ? undefined : DECODER_LABELS[chosen];
  return (bytes) => {
    const source = bytes.includes(0x1b) ? Uint8Array.from(decodeLatin1(bytes).replace(ESCAPES, ''), (c) => c.charCodeAt(0)) : bytes;
    return label ? decodeWith(label, source) : decodeLatin1(source);
  };
}
