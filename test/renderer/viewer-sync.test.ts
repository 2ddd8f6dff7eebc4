/**
 * Synchronized scrolling by position and the viewer's layouts (issue 11, study-level reading):
 * nearest slice along the normal, absolute vs kept-offset links, the parallel-plane check, and
 * which series fill the panes when a layout opens.
 */
import { describe, expect, it } from 'vitest';
import type { Scan } from '../../renderer/src/api/types.ts';
import { autoFill, isPrior, nextLayout, paneCount } from '../../renderer/src/imaging/layout.ts';
import { followReference, linkPanes, linkText, nearestSlice, parallelPlanes, referenceOf, sliceNormal, type StackGeometry } from '../../renderer/src/imaging/sync.ts';

const AXIAL = [1, 0, 0, 0, 1, 0];
const SAGITTAL = [0, 1, 0, 0, 0, -1];
const CORONAL = [1, 0, 0, 0, 0, -1];

const stack = (studyUid: string, positions: (number | null)[], orientation: number[] | null = AXIAL): StackGeometry => ({
  normal: sliceNormal(orientation),
  positions,
  studyUid,
});

describe('slice normal and parallel planes', () => {
  it('takes row x column as the normal: +z (head) for axial, +x for sagittal', () => {
    expect(sliceNormal(AXIAL)).toEqual([0, 0, 1]);
    expect(sliceNormal(SAGITTAL)).toEqual([-1, 0, 0]);
    expect(sliceNormal(CORONAL)?.map((x) => x + 0)).toEqual([0, 1, 0]);
    expect(sliceNormal(null)).toBeNull();
    expect(sliceNormal([1, 0, 0, 1, 0, 0])).toBeNull();
  });

  it('calls axial and a 3° tilted axial parallel, opposite normals parallel with sign -1, axial and sagittal not', () => {
    const tilt = (3 * Math.PI) / 180;
    const tilted = sliceNormal([1, 0, 0, 0, Math.cos(tilt), Math.sin(tilt)])!;
    expect(parallelPlanes([0, 0, 1], tilted)).toEqual({ parallel: true, sign: 1 });
    expect(parallelPlanes([0, 0, 1], [0, 0, -1])).toEqual({ parallel: true, sign: -1 });
    const cross = parallelPlanes(sliceNormal(AXIAL)!, sliceNormal(SAGITTAL)!);
    expect(cross.parallel).toBe(false);
    expect(cross.parallel ? 0 : Math.round(cross.angleDeg)).toBe(90);
    const tenDegrees = (10 * Math.PI) / 180;
    expect(parallelPlanes([0, 0, 1], sliceNormal([1, 0, 0, 0, Math.cos(tenDegrees), Math.sin(tenDegrees)])!).parallel).toBe(false);
  });
});

describe('nearest slice by position', () => {
  it('picks the nearest position, skips slices without one, ties to the lower index', () => {
    expect(nearestSlice([0, 5, 10, 15], 7.4)).toBe(1);
    expect(nearestSlice([0, 5, 10, 15], 7.6)).toBe(2);
    expect(nearestSlice([0, 5, 10, 15], 7.5)).toBe(1);
    expect(nearestSlice([0, null, 10], 4)).toBe(0);
    expect(nearestSlice([0, 5, 10], -100)).toBe(0);
    expect(nearestSlice([0, 5, 10], 100)).toBe(2);
    expect(nearestSlice([null, null], 0)).toBe(-1);
    // Unsorted stacks (positions descending) are searched all the same.
    expect(nearestSlice([20, 15, 10, 5], 14)).toBe(1);
  });
});

describe('linking panes', () => {
  const current = stack('study-now', [0, 5, 10, 15, 20, 25]);
  it('follows absolute positions within a study, across different slice spacings', () => {
    const thin = stack('study-now', [0, 2.5, 5, 7.5, 10, 12.5, 15, 17.5, 20]);
    const link = linkPanes(current, 2, thin, 0);
    expect(link).toEqual({ mode: 'absolute', sign: 1 });
    expect(followReference(link, thin, 10)).toBe(4);
    expect(followReference(link, thin, 25)).toBe(8);
    expect(referenceOf(link, thin, 3)).toBe(7.5);
    // From the thin pane back to the reference: 7.5 mm is nearest to slice 1 (5 mm) or 2 (10 mm); ties go low.
    expect(nearestSlice(current.positions, referenceOf(link, thin, 3)!)).toBe(1);
    expect(linkText(link)).toMatch(/same study/);
  });

  it('keeps, for a prior, the offset that holds when the pair is linked', () => {
    // The prior was placed 40 mm further towards the head; the reader aligned slice 3 (15 mm) with prior slice 1 (50 mm).
    const prior = stack('study-before', [45, 50, 55, 60, 65, 70]);
    const link = linkPanes(current, 3, prior, 1);
    expect(link).toEqual({ mode: 'offset', sign: 1, offsetMm: 35 });
    expect(followReference(link, prior, 25)).toBe(3);
    expect(followReference(link, prior, 0)).toBe(0);
    expect(referenceOf(link, prior, 5)).toBe(35);
    expect(linkText(link)).toContain('+35.0 mm');
  });

  it('counts positions the other way for a pane whose normal is reversed', () => {
    // Same axis, normal -z: a point at z = 10 has position -10 in the pane.
    const reversed = stack('study-now', [-25, -20, -15, -10, -5, 0], [1, 0, 0, 0, -1, 0]);
    const link = linkPanes(current, 0, reversed, 0);
    expect(link).toEqual({ mode: 'absolute', sign: -1 });
    expect(followReference(link, reversed, 10)).toBe(3);
    expect(referenceOf(link, reversed, 1)).toBe(20);
  });

  it('does not link non-parallel planes and says why; nor stacks without geometry', () => {
    const sagittal = stack('study-now', [-10, 0, 10], SAGITTAL);
    const link = linkPanes(current, 0, sagittal, 0);
    expect(link.mode).toBe('none');
    expect(linkText(link)).toMatch(/not parallel \(90° apart\)/);
    expect(followReference(link, sagittal, 0)).toBeNull();
    expect(linkPanes(current, 0, stack('study-now', [0, 1], null), 0).mode).toBe('none');
    expect(linkText(linkPanes(current, 0, stack('study-now', [null, null]), 0))).toMatch(/no Image Position/);
  });
});

const scan = (id: string, study: string, date: string, modality: string, series: number): Scan => ({
  scan_id: id,
  patient_id: 'P',
  study_uid: study,
  study_date: date,
  study_description: null,
  accession_number: null,
  modality,
  body_part: null,
  description: null,
  series_number: series,
  instance_count: 10,
  status: 'received',
  status_reason: null,
  ai_summary: null,
  triage: null,
  created_at: '',
  updated_at: '',
});

describe('layouts', () => {
  const now = scan('now-ct-2', 'S3', '20250301', 'CT', 2);
  const nowCt3 = scan('now-ct-3', 'S3', '20250301', 'CT', 3);
  const nowCt1 = scan('now-ct-1', 'S3', '20250301', 'CT', 1);
  const priorMr = scan('prior-mr', 'S2', '20240601', 'MR', 1);
  const priorCt = scan('prior-ct', 'S2', '20240601', 'CT', 2);
  const oldCt = scan('old-ct', 'S1', '20200101', 'CT', 1);
  const all = [oldCt, nowCt1, priorMr, now, nowCt3, priorCt];

  it('cycles 1x1 -> 1x2 -> 2x2 and counts panes', () => {
    expect(nextLayout('1x1')).toBe('1x2');
    expect(nextLayout('2x2')).toBe('1x1');
    expect([paneCount('1x1'), paneCount('1x2'), paneCount('2x2')]).toEqual([1, 2, 4]);
  });

  it('marks older studies as priors, never the same study or an undated one', () => {
    expect(isPrior(now, priorCt)).toBe(true);
    expect(isPrior(now, nowCt3)).toBe(false);
    expect(isPrior(priorCt, now)).toBe(false);
    expect(isPrior(now, { ...priorCt, study_date: null })).toBe(false);
  });

  it('fills 1x2 with the most recent prior of the same modality, else the next series of the study', () => {
    expect(autoFill(now, all, [], 1).map((s) => s.scan_id)).toEqual(['prior-ct']);
    expect(autoFill(now, [now, nowCt1, nowCt3, priorMr], [], 1).map((s) => s.scan_id)).toEqual(['now-ct-3']);
    // The next series wraps to the study's first when the primary is its last.
    expect(autoFill(nowCt3, [now, nowCt1, nowCt3], [], 1).map((s) => s.scan_id)).toEqual(['now-ct-1']);
  });

  it('fills 2x2 with the prior, then the study, then older priors, without repeating a series on screen', () => {
    expect(autoFill(now, all, [], 3).map((s) => s.scan_id)).toEqual(['prior-ct', 'now-ct-3', 'now-ct-1']);
    expect(autoFill(now, all, [], 5).map((s) => s.scan_id)).toEqual(['prior-ct', 'now-ct-3', 'now-ct-1', 'prior-mr', 'old-ct']);
    expect(autoFill(now, all, ['prior-ct'], 2).map((s) => s.scan_id)).toEqual(['old-ct', 'now-ct-3']);
    expect(autoFill(now, [now], [], 3)).toEqual([]);
  });
});
