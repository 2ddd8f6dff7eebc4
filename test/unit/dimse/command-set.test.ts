/**
 * DIMSE command sets (PS3.7 9.3, E.1) and query identifiers: round trips, and the bounds a
 * peer's command or identifier cannot break.
 */
import { describe, expect, it } from 'vitest';
import { COMMAND, decodeCommand, encodeCommand, NO_DATA_SET, type Command } from '#server/dimse/command-set.ts';
import { encodeIdentifier, readTopLevel, stringValues, TAG } from '#server/dimse/identifier.ts';
import { encodeFileMeta } from '#server/dimse/part10.ts';

const full = (c: Partial<Command> & Pick<Command, 'commandField' | 'dataSetType'>): Command => ({
  messageId: undefined,
  messageIdBeingRespondedTo: undefined,
  affectedSopClassUid: undefined,
  requestedSopClassUid: undefined,
  affectedSopInstanceUid: undefined,
  requestedSopInstanceUid: undefined,
  moveDestination: undefined,
  priority: undefined,
  status: undefined,
  errorComment: undefined,
  remaining: undefined,
  completed: undefined,
  failed: undefined,
  warning: undefined,
  ...c,
});

describe('command sets', () => {
  it('round-trip C-STORE, C-FIND, C-MOVE and C-ECHO requests and responses', () => {
    const commands: Command[] = [
      full({ commandField: COMMAND.cStoreRq, messageId: 7, affectedSopClassUid: '1.2.840.10008.5.1.4.1.1.2', affectedSopInstanceUid: '1.2.3.45', priority: 0, dataSetType: 0 }),
      full({ commandField: COMMAND.cStoreRsp, messageIdBeingRespondedTo: 7, affectedSopClassUid: '1.2.840.10008.5.1.4.1.1.2', affectedSopInstanceUid: '1.2.3.45', status: 0xc000, errorComment: 'no pixel data', dataSetType: NO_DATA_SET }),
      full({ commandField: COMMAND.cFindRq, messageId: 1, affectedSopClassUid: '1.2.840.10008.5.1.4.1.2.2.1', priority: 0, dataSetType: 0 }),
      full({ commandField: COMMAND.cMoveRq, messageId: 2, affectedSopClassUid: '1.2.840.10008.5.1.4.1.2.2.2', moveDestination: 'MIA', priority: 0, dataSetType: 0 }),
      full({ commandField: COMMAND.cMoveRsp, messageIdBeingRespondedTo: 2, status: 0xff00, remaining: 3, completed: 17, failed: 1, warning: 0, dataSetType: NO_DATA_SET }),
      full({ commandField: COMMAND.cEchoRq, messageId: 65535, affectedSopClassUid: '1.2.840.10008.1.1', dataSetType: NO_DATA_SET }),
    ];
    for (const command of commands) expect(decodeCommand(encodeCommand(command))).toEqual(command);
  });

  it('pads odd values to even length and starts with the group length', () => {
    const bytes = encodeCommand(full({ commandField: COMMAND.cEchoRq, messageId: 1, affectedSopClassUid: '1.2.840.10008.1.1', dataSetType: NO_DATA_SET }));
    expect(bytes.readUInt32LE(8)).toBe(bytes.length - 12);
    expect(bytes.length % 2).toBe(0);
  });

  it('refuses elements that overrun, other groups, and commands without their required fields', () => {
    const good = encodeCommand(full({ commandField: COMMAND.cEchoRq, messageId: 1, dataSetType: NO_DATA_SET }));
    const overrun = Buffer.from(good);
    overrun.writeUInt32LE(0x7fffffff, 4);
    expect(() => decodeCommand(overrun)).toThrow(/overruns the command set/);
    const otherGroup = Buffer.from(good);
    otherGroup.writeUInt16LE(0x0008, 0);
    expect(() => decodeCommand(otherGroup)).toThrow(/outside group 0000/);
    expect(() => decodeCommand(good.subarray(0, good.length - 3))).toThrow();
    expect(() => decodeCommand(Buffer.alloc(0))).toThrow(/without a Command Field/);
    expect(() => decodeCommand(Buffer.alloc(70_000))).toThrow(/command set of 70000 bytes/);
  });
});

describe('query identifiers', () => {
  for (const syntax of ['1.2.840.10008.1.2', '1.2.840.10008.1.2.1']) {
    it(`round-trip string values in ${syntax}`, () => {
      const bytes = encodeIdentifier(
        [
          { tag: TAG.patientName, vr: 'PN', value: 'Müller^Anna' },
          { tag: TAG.specificCharacterSet, vr: 'CS', value: 'ISO_IR 192' },
          { tag: TAG.queryRetrieveLevel, vr: 'CS', value: 'STUDY' },
          { tag: TAG.studyInstanceUid, vr: 'UI', value: '1.2.3' },
          { tag: TAG.accessionNumber, vr: 'SH', value: '' },
        ],
        syntax,
      );
      const v = stringValues(readTopLevel(bytes, syntax));
      expect([v(TAG.patientName), v(TAG.queryRetrieveLevel), v(TAG.studyInstanceUid), v(TAG.accessionNumber)]).toEqual(['Müller^Anna', 'STUDY', '1.2.3', '']);
    });
  }

  it('a peer\'s NUL inside a value reads as U+FFFD, its trailing padding as nothing (PostgreSQL cannot store U+0000)', () => {
    const syntax = '1.2.840.10008.1.2.1';
    const bytes = encodeIdentifier([{ tag: TAG.patientName, vr: 'PN', value: 'DOE\0JOHN\0' }], syntax);
    expect(stringValues(readTopLevel(bytes, syntax))(TAG.patientName)).toBe('DOE\uFFFDJOHN');
    const rsp = full({ commandField: COMMAND.cStoreRsp, messageIdBeingRespondedTo: 7, status: 0xc000, errorComment: 'disk\0full', dataSetType: NO_DATA_SET });
    expect(decodeCommand(encodeCommand(rsp)).errorComment).toBe('disk\uFFFDfull');
  });

  it('skips sequences of undefined length and refuses ones without their end', () => {
    // (0008,1110) SQ, undefined length, one item of undefined length holding (0008,1150), then (0010,0020).
    const seq = Buffer.concat([
      Buffer.from([0x08, 0x00, 0x10, 0x11, 0xff, 0xff, 0xff, 0xff]),
      Buffer.from([0xfe, 0xff, 0x00, 0xe0, 0xff, 0xff, 0xff, 0xff]),
      Buffer.from([0x08, 0x00, 0x50, 0x11, 0x04, 0, 0, 0]),
      Buffer.from('1.2\0'),
      Buffer.from([0xfe, 0xff, 0x0d, 0xe0, 0, 0, 0, 0]),
      Buffer.from([0xfe, 0xff, 0xdd, 0xe0, 0, 0, 0, 0]),
    ]);
    const after = Buffer.concat([Buffer.from([0x10, 0x00, 0x20, 0x00, 0x02, 0, 0, 0]), Buffer.from('P1')]);
    const values = readTopLevel(Buffer.concat([seq, after]), '1.2.840.10008.1.2');
    expect(stringValues(values)(TAG.patientId)).toBe('P1');
    expect(values.has(0x00081150)).toBe(false);
    expect(() => readTopLevel(seq.subarray(0, seq.length - 8), '1.2.840.10008.1.2')).toThrow(/without its delimiter/);
    expect(() => readTopLevel(Buffer.from([0x10, 0x00, 0x20, 0x00, 0xff, 0, 0, 0, 1]), '1.2.840.10008.1.2')).toThrow(/overruns the data set/);
  });
});

describe('Part 10 header', () => {
  it('writes the preamble, DICM and a group 0002 whose length covers it', () => {
    const header = encodeFileMeta({ sopClassUid: '1.2.840.10008.5.1.4.1.1.2', sopInstanceUid: '1.2.3', transferSyntaxUid: '1.2.840.10008.1.2.4.70', sourceAeTitle: 'CT1' });
    expect(header.subarray(0, 128).every((b) => b === 0)).toBe(true);
    expect(header.toString('latin1', 128, 132)).toBe('DICM');
    expect(header.length).toBe(144 + header.readUInt32LE(140));
    expect(header.toString('latin1')).toContain('1.2.840.10008.1.2.4.70');
  });
});
