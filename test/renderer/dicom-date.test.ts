/** Display of DICOM values in the renderer (dicom-date.ts). */
import { describe, expect, it } from 'vitest';
import { dicomDate, dicomDateKey } from '../../renderer/src/dicom-date.ts';

describe('DICOM dates', () => {
  it('shows YYYYMMDD as YYYY-MM-DD', () => {
    expect(dicomDate('20260301')).toBe('2026-03-01');
    expect(dicomDate(null)).toBe('—');
    expect(dicomDate('  ')).toBe('—');
  });

  it('reads the ACR-NEMA form YYYY.MM.DD and other separators the same (issue 11: "1997.04.24" was shown raw)', () => {
    expect(dicomDate('1997.04.24')).toBe('1997-04-24');
    expect(dicomDate('1997-04-24')).toBe('1997-04-24');
    expect(dicomDate('1997/04/24')).toBe('1997-04-24');
    expect(dicomDate('19970424 ')).toBe('1997-04-24');
  });

  it('marks anything else instead of passing it off as a date', () => {
    expect(dicomDate('1997.04-24')).toBe('1997.04-24 (not a date)');
    expect(dicomDate('19971324')).toBe('19971324 (not a date)');
    expect(dicomDate('yesterday')).toBe('yesterday (not a date)');
  });

  it('sorts by the date read, whatever the form (the worklist\'s date column)', () => {
    const dates = ['19970501', '1997.04.24', '19970424', '1997-04-30', null, '20010101'];
    expect([...dates].sort((a, b) => dicomDateKey(a).localeCompare(dicomDateKey(b)))).toEqual([null, '1997.04.24', '19970424', '1997-04-30', '19970501', '20010101']);
  });
});
