/**
 * Small decisions of the screens, without a browser: window/level drag sensitivity, the export
 * form's confidence check, when re-analysis asks first, how a failed sign-in is described, and
 * when the worklist's import watch reloads.
 */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../renderer/src/api/client.ts';
import type { ImportJobSummary } from '../../renderer/src/api/types.ts';
import { minConfidenceProblem } from '../../renderer/src/export-filters.ts';
import { autoWindow, dragWindow, renderFrame, type RawFrame } from '../../renderer/src/imaging/frame.ts';
import { keyProblemOf } from '../../renderer/src/key-problem.ts';
import { reanalysisQuestion } from '../../renderer/src/reanalysis.ts';
import { importSignature } from '../../renderer/src/import-signature.ts';

describe('window/level drag', () => {
  const ctRange = 4095; // -1024..3071 HU
  it('moves a brain window about 1 HU per pixel and a bone window about 11, not 16 for both', () => {
    expect(dragWindow({ center: 40, width: 80 }, 10, 0, ctRange)).toEqual({ center: 40, width: 80 + 10 * (ctRange / 4096) });
    expect(dragWindow({ center: 40, width: 80 }, 0, 10, ctRange).center).toBeCloseTo(50, 1);
    const bone = dragWindow({ center: 600, width: 2800 }, 10, 10, ctRange);
    expect(bone.width).toBeCloseTo(2800 + 109.4, 1);
    expect(bone.center).toBeCloseTo(709.4, 1);
  });

  it('a drag across 256 px changes a window by about its own width', () => {
    expect(dragWindow({ center: 300, width: 400 }, 256, 0, ctRange).width).toBeCloseTo(800, 5);
  });

  it('small value ranges (float data) still move, and the width never drops below 1', () => {
    const pet = dragWindow({ center: 2.5, width: 5 }, 0, 10, 10);
    expect(pet.center).toBeCloseTo(2.5 + 10 * (5 / 256), 5);
    expect(dragWindow({ center: 40, width: 80 }, -1000, 0, ctRange).width).toBe(1);
  });
});

describe('auto window', () => {
  const frame = (values: number[]): RawFrame => ({
    rows: 1,
    columns: values.length,
    samplesPerPixel: 1,
    values: Float32Array.from(values),
    photometric: 'MONOCHROME2',
    defaultWindow: null,
    min: Math.min(...values),
    max: Math.max(...values),
  });
  const grey = (f: RawFrame): number[] => {
    const out = new Uint8ClampedArray(f.columns * 4);
    renderFrame(f, autoWindow(f), out);
    return [...out].filter((_, i) => i % 4 === 0);
  };

  it('draws a flat frame black, not white (issue 11: an all-zero frame had window 1 / level 0)', () => {
    expect(grey(frame([0, 0, 0]))).toEqual([0, 0, 0]);
    expect(grey(frame([-1024, -1024]))).toEqual([0, 0]);
  });

  it('spans the full range otherwise', () => {
    // The middle lands on 128 or 129 (C.11.2.1.2.1 is centred half a unit low).
    const [black, middle, white] = grey(frame([0, 50, 100]));
    expect([black, white]).toEqual([0, 255]);
    expect(Math.abs(middle! - 128.5)).toBeLessThan(1);
  });
});

describe('export form', () => {
  it('accepts nothing (no filter) or a decimal from 0 to 1', () => {
    for (const ok of ['', '  ', '0', '1', '0.5', '.75', '1.0']) expect(minConfidenceProblem(ok), ok).toBeNull();
  });
  it('explains anything else', () => {
    expect(minConfidenceProblem('50')).toMatch(/from 0 to 1.*0\.5 is 50%/);
    expect(minConfidenceProblem('1.01')).toMatch(/from 0 to 1/);
    for (const bad of ['-0.1', 'abc', '0,5', '1e-1', '0x1', 'Infinity']) expect(minConfidenceProblem(bad), bad).toMatch(/must be a number from 0 to 1/);
  });
});

describe('analysing again', () => {
  it('asks when findings were reviewed or a report was drafted, not otherwise', () => {
    expect(reanalysisQuestion('P1 MR', { status: 'analyzed', reviewedHere: false, reports: 0 })).toBeNull();
    expect(reanalysisQuestion('P1 MR', { status: 'failed', reviewedHere: false, reports: null })).toBeNull();
    expect(reanalysisQuestion('P1 MR', { status: 'in_review', reviewedHere: false, reports: 0 })).toMatch(/^Analyse P1 MR again\?\n\n.*accepted or rejected/);
    expect(reanalysisQuestion('P1 MR', { status: 'reviewed', reviewedHere: false, reports: null })).toMatch(/accepted or rejected/);
    expect(reanalysisQuestion('P1 MR', { status: 'analyzed', reviewedHere: true, reports: 0 })).toMatch(/accepted or rejected/);
    const both = reanalysisQuestion('P1 MR', { status: 'reviewed', reviewedHere: true, reports: 1 });
    expect(both).toMatch(/accepted or rejected[\s\S]*report/);
    expect(reanalysisQuestion('P1 MR', { status: 'analyzed', reviewedHere: false, reports: 1 })).toMatch(/report drafted/);
  });

  it('does not ask about a reported scan: the server refuses it and says why', () => {
    expect(reanalysisQuestion('P1 MR', { status: 'reported', reviewedHere: true, reports: 1 })).toBeNull();
  });
});

describe('sign-in problems', () => {
  const error = (status: number, title: string) => new ApiError({ status, title, message: 'm', details: null, requestId: null });
  it('tells a refused key from a silent server and from rate limiting', () => {
    expect(keyProblemOf(error(401, 'Unauthorized')).kind).toBe('rejected');
    expect(keyProblemOf(error(0, 'Server unreachable')).kind).toBe('unreachable');
    expect(keyProblemOf(error(429, 'Too Many Requests')).kind).toBe('rate_limited');
    expect(keyProblemOf(error(500, 'Internal')).kind).toBe('other');
    expect(keyProblemOf(new Error('IPC failed'))).toEqual({ kind: 'other', message: 'IPC failed' });
  });
});

describe('import watch', () => {
  const job = (id: string, status: ImportJobSummary['status'], imported: number): ImportJobSummary => ({
    id,
    kind: 'path',
    sources: ['/d'],
    status,
    counts: { files_total: 10, files_seen: imported, imported, duplicates: 0, conflicts: 0, rejected: 0, bytes: 0 },
    rejects_total: 0,
    error: null,
    created_at: '',
    updated_at: '',
    finished_at: null,
  });
  it('changes when a job appears, imports more, or ends - also one that ran entirely between two looks', () => {
    const idle = importSignature([job('imp_1', 'completed', 10)]);
    expect(importSignature([job('imp_1', 'completed', 10)])).toBe(idle);
    expect(importSignature([job('imp_2', 'completed', 4), job('imp_1', 'completed', 10)])).not.toBe(idle);
    expect(importSignature([job('imp_2', 'running', 4)])).not.toBe(importSignature([job('imp_2', 'running', 5)]));
    expect(importSignature([job('imp_2', 'running', 5)])).not.toBe(importSignature([job('imp_2', 'completed', 5)]));
  });
});
