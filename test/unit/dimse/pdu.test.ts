/**
 * The PDU codec and framing reader (PS3.8 9.3): what mia writes reads back the same, and every
 * length a peer sends is checked before it sizes anything.
 */
import { describe, expect, it } from 'vitest';
import {
  ABORT,
  decodeAbort,
  decodeAssociateAc,
  decodeAssociateRj,
  decodeAssociateRq,
  decodePData,
  encodeAbort,
  encodeAssociateAc,
  encodeAssociateRj,
  encodeAssociateRq,
  encodePData,
  isValidAeTitle,
  PduError,
  PDU,
} from '#server/dimse/pdu.ts';
import { associationBounds, PduReader } from '#server/dimse/pdu-reader.ts';

const user = { maxPduLength: 16_384, implementationClassUid: '1.2.3.4.5', implementationVersionName: 'TEST_1' };
const rq = {
  calledAeTitle: 'MIA',
  callingAeTitle: 'MODALITY',
  applicationContext: '1.2.840.10008.3.1.1.1',
  contexts: [
    { id: 1, abstractSyntax: '1.2.840.10008.5.1.4.1.1.2', transferSyntaxes: ['1.2.840.10008.1.2.4.70', '1.2.840.10008.1.2.1'] },
    { id: 3, abstractSyntax: '1.2.840.10008.1.1', transferSyntaxes: ['1.2.840.10008.1.2'] },
  ],
  user,
};

/** Frames one encoded PDU and returns its body. */
function body(pdu: Buffer): Buffer {
  const [raw] = new PduReader(associationBounds(1 << 20)).push(pdu);
  if (!raw) throw new Error('no PDU');
  return raw.body;
}

describe('PDU codec', () => {
  it('round-trips an A-ASSOCIATE-RQ with its contexts and user information', () => {
    const decoded = decodeAssociateRq(body(encodeAssociateRq(rq)));
    expect(decoded).toEqual({ type: PDU.associateRq, protocolVersion: 1, ...rq });
  });

  it('round-trips an A-ASSOCIATE-AC, an A-ASSOCIATE-RJ and an A-ABORT', () => {
    const ac = { calledAeTitle: 'MIA', callingAeTitle: 'MODALITY', applicationContext: rq.applicationContext, contexts: [{ id: 1, result: 0, transferSyntax: '1.2.840.10008.1.2.1' }, { id: 3, result: 3, transferSyntax: '' }], user };
    expect(decodeAssociateAc(body(encodeAssociateAc(ac)))).toEqual({ type: PDU.associateAc, protocolVersion: 1, ...ac });
    expect(decodeAssociateRj(body(encodeAssociateRj({ result: 1, source: 1, reason: 3 })))).toEqual({ type: PDU.associateRj, result: 1, source: 1, reason: 3 });
    expect(decodeAbort(body(encodeAbort(2, 6)))).toEqual({ type: PDU.abort, source: 2, reason: 6 });
  });

  it('round-trips P-DATA-TF PDVs with their command and last flags', () => {
    const pdvs = [
      { contextId: 1, command: true, last: true, data: Buffer.from([1, 2, 3, 4]) },
      { contextId: 3, command: false, last: false, data: Buffer.from('data') },
    ];
    expect(decodePData(body(encodePData(pdvs)))).toEqual(pdvs);
  });

  it('refuses items and PDVs whose lengths overrun, and PDUs without the required items', () => {
    const overrun = body(encodeAssociateRq(rq));
    overrun.writeUInt16BE(0xffff, 68 + 2);
    expect(() => decodeAssociateRq(overrun)).toThrow(/overruns its PDU/);
    expect(() => decodeAssociateRq(Buffer.alloc(20))).toThrow(/shorter than its fixed fields/);
    expect(() => decodeAssociateRq(Buffer.alloc(68))).toThrow(/without an application context/);
    expect(() => decodePData(Buffer.from([0, 0, 0, 9, 1, 3, 0]))).toThrow(/overruns its PDU/);
    expect(() => decodePData(Buffer.from([0, 0, 0, 1, 1, 3]))).toThrow(/leaves no room/);
    expect(() => decodePData(Buffer.alloc(0))).toThrow(/without a PDV/);
    expect(() => decodeAbort(Buffer.alloc(5))).toThrow(PduError);
  });

  it('accepts only AE titles of 1-16 printable characters without a backslash', () => {
    expect(isValidAeTitle('MIA')).toBe(true);
    expect(isValidAeTitle('A'.repeat(16))).toBe(true);
    expect(isValidAeTitle('A'.repeat(17))).toBe(false);
    expect(isValidAeTitle('   ')).toBe(false);
    expect(isValidAeTitle('A\\B')).toBe(false);
    expect(isValidAeTitle('')).toBe(false);
  });
});

describe('PDU framing', () => {
  it('reassembles PDUs split anywhere and several in one chunk', () => {
    const a = encodeAbort(0, 0);
    const p = encodePData([{ contextId: 1, command: true, last: true, data: Buffer.alloc(300, 7) }]);
    const stream = Buffer.concat([a, p, a]);
    for (const split of [1, 5, 6, 7, 100, stream.length - 1]) {
      const reader = new PduReader(associationBounds(16_384));
      const pdus = [...reader.push(stream.subarray(0, split)), ...reader.push(stream.subarray(split))];
      expect(pdus.map((x) => x.type)).toEqual([PDU.abort, PDU.pData, PDU.abort]);
      expect(reader.midPdu).toBe(false);
    }
  });

  it('refuses a length beyond the bound for its type before allocating, and unknown types', () => {
    const reader = (): PduReader => new PduReader(associationBounds(16_384));
    expect(() => reader().push(Buffer.from([0x04, 0, 0, 0, 0x40, 7]))).toThrow(/announces 16391 bytes, more than the 16390 allowed/);
    expect(() => reader().push(Buffer.from([0x01, 0, 0xff, 0xff, 0xff, 0xff]))).toThrow(/announces 4294967295 bytes/);
    expect(() => reader().push(Buffer.from([0x05, 0, 0, 0, 0, 5]))).toThrow(/more than the 4 allowed/);
    try {
      reader().push(Buffer.from([0x0a, 0, 0, 0, 0, 4]));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(PduError);
      expect((err as PduError).abortReason).toBe(ABORT.reasonUnrecognizedPdu);
    }
    // Within the bound: held until it is complete.
    const partial = reader();
    expect(partial.push(Buffer.from([0x04, 0, 0, 0, 0x40, 6, 0, 0]))).toEqual([]);
    expect(partial.midPdu).toBe(true);
  });
});
