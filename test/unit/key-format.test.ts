import { describe, expect, it } from 'vitest';
import { digestKey, digestsEqual, displayPrefix, generateKey, keyShapeProblem, KEY_LENGTH } from '#server/auth/key-format.ts';

describe('API key format', () => {
  it('generates distinct, well-formed keys', () => {
    const keys = new Set(Array.from({ length: 200 }, generateKey));
    expect(keys.size).toBe(200);
    for (const key of keys) {
      expect(key).toHaveLength(KEY_LENGTH);
      expect(keyShapeProblem(key)).toBeUndefined();
    }
  });

  it('catches every single-character typo and truncation', () => {
    const key = generateKey();
    for (let i = 4; i < key.length; i += 1) {
      const c = key[i] === 'x' ? 'y' : 'x';
      expect(keyShapeProblem(key.slice(0, i) + c + key.slice(i + 1))).toBe('checksum mismatch');
    }
    expect(keyShapeProblem(key.slice(0, -1))).toBe('wrong length or prefix');
    expect(keyShapeProblem('sk_' + key.slice(3))).toBe('wrong length or prefix');
    expect(keyShapeProblem(key.slice(0, 10) + '!' + key.slice(11))).toBe('invalid characters');
  });

  it('stores a 64-hex digest and shows only a short prefix', () => {
    const key = generateKey();
    expect(digestKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(digestsEqual(digestKey(key), digestKey(key))).toBe(true);
    expect(digestsEqual(digestKey(key), digestKey(generateKey()))).toBe(false);
    expect(displayPrefix(key)).toBe(key.slice(0, 10));
  });
});
