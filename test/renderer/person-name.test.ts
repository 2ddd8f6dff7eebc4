/** DICOM person names (PS3.5 6.2.1) as the viewer's overlay shows them. */
import { describe, expect, it } from 'vitest';
import { personName } from '../../renderer/src/person-name.ts';

describe('personName', () => {
  it('shows family, then prefix, given and middle names, then the suffix; the alphabetic form only', () => {
    expect(personName('Doe^Jane')).toBe('Doe, Jane');
    expect(personName('Doe^Jane^Q^Dr^III')).toBe('Doe, Dr Jane Q III');
    expect(personName('Yamada^Tarou=山田^太郎=やまだ^たろう')).toBe('Yamada, Tarou');
    expect(personName('ANONYMOUS')).toBe('ANONYMOUS');
    expect(personName('')).toBe('');
  });
});
