/** How a send attempt's answer is judged: sent, worth trying again, or refused for good. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { matches } from '#server/routing/rules.ts';
import { backoffMs, BACKOFF_MS } from '#server/routing/send-worker.ts';
import { cStoreOutcome, readPart10 } from '#server/routing/send-outcome.ts';
import { stowVerdict } from '#server/routing/stow-sender.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';

describe('C-STORE status', () => {
  it('success and warnings are sent; out of resources is retried; the object refused is not', () => {
    expect(cStoreOutcome(0x0000).kind).toBe('sent');
    expect(cStoreOutcome(0xb000).kind).toBe('sent');
    expect(cStoreOutcome(0xb007).kind).toBe('sent');
    expect(cStoreOutcome(0xa700)).toMatchObject({ kind: 'transient', error: expect.stringContaining('0xA700') });
    expect(cStoreOutcome(0xa7ff).kind).toBe('transient');
    expect(cStoreOutcome(0xa900)).toMatchObject({ kind: 'permanent', error: expect.stringContaining('0xA900') });
    expect(cStoreOutcome(0xc000).kind).toBe('permanent');
    expect(cStoreOutcome(0xc123).kind).toBe('permanent');
    expect(cStoreOutcome(0x0122).kind).toBe('permanent');
  });
});

describe('STOW-RS answer', () => {
  const uid = '1.2.3.4';
  const ref = (tag: string, sop: string, reason?: number) => ({
    [tag]: { vr: 'SQ', Value: [{ '00081155': { vr: 'UI', Value: [sop] }, ...(reason === undefined ? {} : { '00081197': { vr: 'US', Value: [reason] } }) }] },
  });
  it('finds the object among the stored or the failed, with the failure reason', () => {
    expect(stowVerdict(ref('00081199', uid), uid)).toEqual({ stored: true });
    expect(stowVerdict(ref('00081198', uid, 0xa900), uid)).toEqual({ stored: false, reason: 0xa900 });
    expect(stowVerdict(ref('00081198', uid), uid)).toEqual({ stored: false, reason: null });
    expect(stowVerdict(ref('00081199', '9.9'), uid)).toBeUndefined();
    expect(stowVerdict({ '00081199': { vr: 'SQ', Value: 'not a list' } }, uid)).toBeUndefined();
    expect(stowVerdict(null, uid)).toBeUndefined();
  });
});

describe('backoff', () => {
  it('grows per attempt, is capped, and is jittered by at most 20 %', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => backoffMs(n, () => 0.5))).toEqual([...BACKOFF_MS, BACKOFF_MS[5], BACKOFF_MS[5]]);
    expect(backoffMs(1, () => 0)).toBe(8_000);
    expect(backoffMs(1, () => 1)).toBe(12_000);
  });
});

describe('Part 10 meta header', () => {
  it('reads SOP class, instance and transfer syntax; refuses what is not Part 10', () => {
    const bytes = readFileSync(CT_SMALL);
    expect(readPart10(bytes)).toMatchObject({ sopClassUid: '1.2.840.10008.5.1.4.1.1.2', transferSyntaxUid: '1.2.840.10008.1.2.1' });
    expect(readPart10(bytes.subarray(0, 140))).toBeUndefined();
    expect(readPart10(Buffer.alloc(200))).toBeUndefined();
  });
});

describe('rule conditions', () => {
  const facts = { analysis_id: 'ana_1', modality: 'CT', model_id: 'mia-phantom-detector', labels: ['tumor_detected'] };
  it('hold only when every condition given holds', () => {
    expect(matches({}, facts)).toBe(true);
    expect(matches({ modalities: ['CT', 'MR'] }, facts)).toBe(true);
    expect(matches({ modalities: ['MR'] }, facts)).toBe(false);
    expect(matches({ model_id: 'other' }, facts)).toBe(false);
    expect(matches({ labels: ['hemorrhage_detected', 'tumor_detected'] }, facts)).toBe(true);
    expect(matches({ labels: ['hemorrhage_detected'] }, facts)).toBe(false);
    expect(matches({ positive_only: true }, { ...facts, labels: [] })).toBe(false);
    expect(matches({ positive_only: true, modalities: ['CT'] }, facts)).toBe(true);
  });
});
