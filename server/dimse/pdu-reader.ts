/**
 * Framing of PDUs on a byte stream (PS3.8 9.3.1: type, reserved byte, 4-byte big-endian length).
 * The length a peer announces is checked against a bound for its type before a single byte is
 * allocated for it (dcmjs-dimse took it as is, up to 4 GiB: docs/dicom-network.md), and the body
 * is copied once into a buffer of exactly that size, never re-concatenated per chunk. Each body
 * is a buffer of its own that this reader never writes again once handed out, so a receiver may
 * keep views of it (scp.ts keeps a C-STORE's fragments until the instance is whole).
 */
import { ABORT, MAX_ASSOCIATE_PDU_LENGTH, PDU, PduError } from '#server/dimse/pdu.ts';

export type RawPdu = { type: number; body: Buffer };

/** The largest body accepted for a PDU type; undefined: the type is not one of PS3.8's seven. */
export type PduBounds = (type: number) => number | undefined;

export class PduReader {
  private readonly header = Buffer.alloc(6);
  private headerFilled = 0;
  private body: Buffer | undefined;
  private bodyFilled = 0;
  private type = 0;

  constructor(private readonly bounds: PduBounds) {}

  /** True while part of a PDU has arrived and the rest has not. */
  get midPdu(): boolean {
    return this.headerFilled > 0;
  }

  /** The PDUs completed by this chunk, in order; throws PduError on a header out of bounds. */
  push(chunk: Buffer): RawPdu[] {
    const done: RawPdu[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.headerFilled < 6) {
        const n = Math.min(6 - this.headerFilled, chunk.length - at);
        chunk.copy(this.header, this.headerFilled, at, at + n);
        this.headerFilled += n;
        at += n;
        if (this.headerFilled < 6) break;
        this.type = this.header[0] ?? 0;
        const length = this.header.readUInt32BE(2);
        const max = this.bounds(this.type);
        if (max === undefined) throw new PduError(`unknown PDU type 0x${this.type.toString(16).padStart(2, '0')}`, ABORT.reasonUnrecognizedPdu);
        if (length > max) throw new PduError(`PDU type 0x${this.type.toString(16).padStart(2, '0')} announces ${length} bytes, more than the ${max} allowed`);
        this.body = Buffer.allocUnsafe(length);
        this.bodyFilled = 0;
      }
      const body = this.body ?? Buffer.alloc(0);
      const n = Math.min(body.length - this.bodyFilled, chunk.length - at);
      chunk.copy(body, this.bodyFilled, at, at + n);
      this.bodyFilled += n;
      at += n;
      if (this.bodyFilled === body.length) {
        done.push({ type: this.type, body });
        this.headerFilled = 0;
        this.body = undefined;
      }
    }
    return done;
  }
}

/**
 * Bounds for one side of an association: P-DATA-TF up to the maximum length this side announced
 * (plus one PDV header, for peers that count the maximum as the PDV's length), A-ASSOCIATE
 * PDUs up to a fixed cap, the 4-byte ones exactly.
 */
export function associationBounds(maxPduLength: number): PduBounds {
  return (type) => {
    switch (type) {
      case PDU.associateRq:
      case PDU.associateAc:
        return MAX_ASSOCIATE_PDU_LENGTH;
      case PDU.pData:
        return maxPduLength + 6;
      case PDU.associateRj:
      case PDU.releaseRq:
      case PDU.releaseRp:
      case PDU.abort:
        return 4;
      default:
        return undefined;
    }
  };
}
