import { describe, expect, it } from 'vitest';
import { parseUid } from '#server/dicom/uid.ts';
import { trimPadding } from '#server/dicom/values.ts';

describe('value padding (PS3.5 6.2)', () => {
  it('removes trailing spaces and NULs, in any mix, and nothing else', () => {
    expect(trimPadding('CT ')).toBe('CT');
    expect(trimPadding('1.2.3\0')).toBe('1.2.3');
    expect(trimPadding('A B \0 \0')).toBe('A B');
    expect(trimPadding(' lead')).toBe(' lead');
    expect(trimPadding('in\0side')).toBe('in\0side');
    expect(trimPadding(' \0 ')).toBe('');
    expect(trimPadding('')).toBe('');
    expect(trimPadding('tab\t')).toBe('tab\t');
  });

  it('is what a padded UID is read as', () => {
    expect(parseUid(' 1.2.840.10008.1.2.1\0')).toEqual({ ok: true, uid: '1.2.840.10008.1.2.1' });
    expect(parseUid('\0 \0')).toEqual({ ok: false, reason: 'empty UID' });
  });
});
