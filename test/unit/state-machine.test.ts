import { describe, expect, it } from 'vitest';
import { SCAN_STATUSES } from '#common/vocabulary.ts';
import { MiaError } from '#server/errors.ts';
import { canSystemMove, checkClientTransition, clientTargetsFrom } from '#server/scans/state-machine.ts';

function kindOf(work: () => unknown): string | undefined {
  try {
    work();
    return undefined;
  } catch (error) {
    return error instanceof MiaError ? error.kind : 'other';
  }
}

describe('scan state machine (PRODUCT.md, Scan states)', () => {
  it('allows exactly the client transitions of the product', () => {
    const table = Object.fromEntries(SCAN_STATUSES.map((s) => [s, clientTargetsFrom(s)]));
    expect(table).toEqual({
      received: ['queued', 'archived'],
      queued: ['archived'],
      analyzing: ['archived'],
      analyzed: ['queued', 'in_review', 'archived'],
      failed: ['queued', 'archived'],
      in_review: ['queued', 'reviewed', 'archived'],
      reviewed: ['queued', 'reported', 'archived'],
      reported: ['archived'],
      archived: [],
    });
  });

  it('refuses unknown and system-only states as invalid, wrong-state requests as conflicts', () => {
    expect(kindOf(() => checkClientTransition('analyzed', 'bogus'))).toBe('invalid');
    expect(kindOf(() => checkClientTransition('queued', 'analyzing'))).toBe('invalid');
    expect(kindOf(() => checkClientTransition('received', 'reviewed'))).toBe('conflict');
    expect(kindOf(() => checkClientTransition('archived', 'archived'))).toBe('conflict');
    expect(checkClientTransition('analyzed', 'in_review')).toBe('in_review');
  });

  it('lets the system run the analysis states', () => {
    expect(canSystemMove('received', 'queued')).toBe(true);
    expect(canSystemMove('queued', 'analyzing')).toBe(true);
    expect(canSystemMove('analyzing', 'analyzed')).toBe(true);
    expect(canSystemMove('analyzing', 'failed')).toBe(true);
    expect(canSystemMove('reported', 'analyzing')).toBe(false);
  });

  it('lets the system requeue an interrupted job and undo a cancelled or not-applicable one', () => {
    expect(canSystemMove('analyzing', 'queued')).toBe(true);
    expect(canSystemMove('analyzing', 'received')).toBe(true);
    expect(canSystemMove('queued', 'received')).toBe(true);
    expect(canSystemMove('queued', 'analyzed')).toBe(true);
    expect(canSystemMove('in_review', 'received')).toBe(false);
    expect(canSystemMove('reported', 'queued')).toBe(false);
  });

  it('lets the reading workflow start, complete, reopen and report a review, never from an unread scan', () => {
    expect(canSystemMove('analyzed', 'in_review')).toBe(true);
    expect(canSystemMove('in_review', 'reviewed')).toBe(true);
    expect(canSystemMove('reviewed', 'in_review')).toBe(true);
    for (const from of ['analyzed', 'in_review', 'reviewed'] as const) expect(canSystemMove(from, 'reported')).toBe(true);
    for (const from of ['received', 'queued', 'analyzing', 'failed', 'archived'] as const) {
      expect(canSystemMove(from, 'reported')).toBe(false);
      expect(canSystemMove(from, 'in_review')).toBe(false);
    }
  });
});
