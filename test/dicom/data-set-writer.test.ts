/**
 * mia's DICOM writer (server/dicom/write) against readers it does not share code with: pydicom
 * and dcmtk's dcmdump read a Part 10 file holding every VR the writer offers, nested sequences
 * and UTF-8 text, and get the values back; values that do not fit their VR are refused naming
 * the tag; decimals always fit DS's 16 characters.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { bytes, DicomWriteError, encodeDataSet, formatDecimal, numbers, sequence, tagOf, text } from '#server/dicom/write/data-set-writer.ts';
import { hashedUid } from '#server/dicom/write/hashed-uid.ts';
import { writePart10 } from '#server/dicom/write/part10-file.ts';
import { topLevelElements } from '#server/dicom/parse.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'mia-writer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SOP_CLASS = '1.2.840.10008.5.1.4.1.1.7';
const SOP_INSTANCE = hashedUid('writer test');

const PYDICOM_READ = `
import json, sys, pydicom
ds = pydicom.dcmread(sys.argv[1])
item = ds.ReferencedSeriesSequence[0]
print(json.dumps({
  'ts': ds.file_meta.TransferSyntaxUID, 'group_length': ds.file_meta.FileMetaInformationGroupLength,
  'charset': ds.SpecificCharacterSet, 'name': str(ds.PatientName), 'id': ds.PatientID, 'sex': ds.PatientSex,
  'odd': ds.StudyDescription, 'uid': ds.SOPInstanceUID, 'ds': [str(v) for v in ds.ImagePositionPatient],
  'us': ds.Rows, 'ss': ds[0x00189219].value, 'ul': ds[0x00081161].value, 'fd': ds[0x0040a161].value,
  'fl': [float(v) for v in ds.GraphicData], 'ob': list(ds[0x00091010].value) if 0x00091010 in ds else None,
  'series': item.SeriesInstanceUID, 'nested': item.ReferencedSOPSequence[0].ReferencedSOPInstanceUID,
  'empty_seq': len(ds.ReferencedPerformedProcedureStepSequence), 'empty': ds.AccessionNumber,
}, ensure_ascii=False))
`;

describe('a Part 10 file from the writer', () => {
  it('reads back in pydicom and dcmdump with every value as written', async () => {
    const file = writePart10(
      [
        text(tagOf(0x0008, 0x0016), 'UI', SOP_CLASS),
        text(tagOf(0x0008, 0x0018), 'UI', SOP_INSTANCE),
        text(tagOf(0x0010, 0x0010), 'PN', 'Ørsted^Åse'),
        text(tagOf(0x0010, 0x0020), 'LO', 'ID-1'),
        text(tagOf(0x0010, 0x0040), 'CS', 'F'),
        text(tagOf(0x0008, 0x0050), 'SH', null),
        text(tagOf(0x0008, 0x1030), 'LO', 'odd'),
        text(tagOf(0x0020, 0x0032), 'DS', [formatDecimal(-125.123456789012), '0.1', formatDecimal(1e-7)]),
        numbers(tagOf(0x0028, 0x0010), 'US', 512),
        numbers(tagOf(0x0018, 0x9219), 'SS', -3),
        numbers(tagOf(0x0008, 0x1161), 'UL', 4_000_000_000),
        numbers(tagOf(0x0040, 0xa161), 'FD', 0.8734567165374756),
        numbers(tagOf(0x0070, 0x0022), 'FL', [1.5, 2.25]),
        sequence(tagOf(0x0008, 0x1111), []),
        sequence(tagOf(0x0008, 0x1115), [[
          text(tagOf(0x0020, 0x000e), 'UI', '1.2.3'),
          sequence(tagOf(0x0008, 0x1199), [[text(tagOf(0x0008, 0x1150), 'UI', SOP_CLASS), text(tagOf(0x0008, 0x1155), 'UI', '1.2.3.4')]]),
        ]]),
        bytes(tagOf(0x0009, 0x1010), 'OB', Uint8Array.of(1, 2, 3)),
      ],
      { sopClassUid: SOP_CLASS, sopInstanceUid: SOP_INSTANCE },
    );
    expect(Buffer.from(file.subarray(128, 132)).toString('latin1')).toBe('DICM');
    expect(file.length % 2).toBe(0);
    const path = join(dir, 'all-vrs.dcm');
    writeFileSync(path, file);

    const read = JSON.parse((await run('/usr/bin/python3', ['-c', PYDICOM_READ, path])).stdout);
    expect(read).toMatchObject({
      ts: '1.2.840.10008.1.2.1',
      charset: 'ISO_IR 192',
      name: 'Ørsted^Åse',
      id: 'ID-1',
      sex: 'F',
      odd: 'odd',
      uid: SOP_INSTANCE,
      ds: ['-125.12345678901', '0.1', '1e-7'],
      us: 512,
      ss: -3,
      ul: 4_000_000_000,
      fd: 0.8734567165374756,
      fl: [1.5, 2.25],
      series: '1.2.3',
      nested: '1.2.3.4',
      empty_seq: 0,
      empty: '',
    });
    const dump = await run('dcmdump', ['-q', path]);
    expect(dump.stderr).toBe('');
    expect(dump.stdout).toContain('(0002,0000) UL');
    // mia's own reader too, in the character set the file names.
    const own = topLevelElements(file);
    if ('reason' in own) throw new Error(own.reason);
    expect(own.values.text('x00100010')).toBe('Ørsted^Åse');
    expect(own.values.code('x00200032')).toBe('-125.12345678901\\0.1\\1e-7');
  });

  it('pads text with spaces and UIDs with NUL to even lengths, and sorts elements by tag', () => {
    const encoded = encodeDataSet([text(tagOf(0x0010, 0x0020), 'LO', 'ABC'), text(tagOf(0x0008, 0x0018), 'UI', '1.23')]);
    // (0008,0018) UI, length 4, '1.23'; then (0010,0020) LO, length 4, 'ABC '.
    expect(Buffer.from(encoded).toString('latin1')).toBe('\x08\x00\x18\x00UI\x04\x001.23\x10\x00\x20\x00LO\x04\x00ABC ');
    const odd = encodeDataSet([text(tagOf(0x0008, 0x0018), 'UI', '1.2.3')]);
    expect([...odd.subarray(-2)]).toEqual([0x33, 0x00]);
  });

  it('refuses values that do not fit their VR, naming the tag', () => {
    const refused = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(error).toBeInstanceOf(DicomWriteError);
        return (error as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused(() => text(tagOf(0x0008, 0x0060), 'CS', 'sr'))).toMatch(/^\(0008,0060\): not a valid CS/);
    expect(refused(() => text(tagOf(0x0008, 0x0018), 'UI', '1.2.x'))).toMatch(/not a valid UI/);
    expect(refused(() => text(tagOf(0x0008, 0x0018), 'UI', '1.02'))).toMatch(/not a valid UI/);
    expect(refused(() => text(tagOf(0x0010, 0x0020), 'LO', 'x'.repeat(65)))).toMatch(/longer than 64/);
    expect(refused(() => text(tagOf(0x0010, 0x0020), 'LO', 'a\\b'))).toMatch(/backslash/);
    expect(refused(() => text(tagOf(0x0010, 0x0020), 'LO', 'a\nb'))).toMatch(/line breaks/);
    expect(refused(() => text(tagOf(0x0008, 0x0020), 'DA', '2026031'))).toMatch(/not a valid DA/);
    expect(refused(() => text(tagOf(0x0008, 0x0070), 'CS', 'É'))).toMatch(/ASCII/);
    expect(refused(() => numbers(tagOf(0x0028, 0x0010), 'US', 70_000))).toMatch(/not a valid US/);
    expect(refused(() => numbers(tagOf(0x0040, 0xa161), 'FD', Number.NaN))).toMatch(/not a valid FD/);
    expect(refused(() => encodeDataSet([text(tagOf(0x0010, 0x0020), 'LO', 'a'), text(tagOf(0x0010, 0x0020), 'LO', 'b')]))).toMatch(/twice/);
  });

  it('writes any finite number as a DS of at most 16 characters that reads back close', () => {
    for (const n of [0, 1, -1, 0.1, 1 / 3, -2 / 3, 123456789.123456789, 1e-12, -1.2345678901234567e300, 5e-324, 0.8734567165374756]) {
      const s = formatDecimal(n);
      expect(s.length, s).toBeLessThanOrEqual(16);
      expect(() => text(tagOf(0x0040, 0xa30a), 'DS', s)).not.toThrow();
      expect(Math.abs(Number(s) - n)).toBeLessThanOrEqual(Math.abs(n) * 1e-9);
    }
    expect(() => formatDecimal(Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });

  it('derives the same 2.25 UID from the same name, and UUID version 8 bits', () => {
    const uid = hashedUid('mia analysis sr', 'ana_1', 'abc');
    expect(uid).toBe(hashedUid('mia analysis sr', 'ana_1', 'abc'));
    expect(uid).not.toBe(hashedUid('mia analysis sr', 'ana_1a', 'bc'));
    expect(uid).toMatch(/^2\.25\.[1-9]\d*$/);
    expect(uid.length).toBeLessThanOrEqual(64);
    const hex = BigInt(uid.slice(5)).toString(16).padStart(32, '0');
    expect(hex[12]).toBe('8');
    expect(['8', '9', 'a', 'b']).toContain(hex[16]);
  });
});
