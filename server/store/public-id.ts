/**
 * Public identifiers for records mia creates (users, keys, reports...). A readable prefix says
 * what an id names in a support ticket; 96 random bits make ids unguessable, so an id seen in a
 * log does not let anyone enumerate neighbours.
 */
import { randomBytes } from 'node:crypto';

export type IdPrefix = 'usr' | 'key' | 'ana' | 'fnd' | 'rpt' | 'add' | 'exp' | 'msr' | 'dkey' | 'asg' | 'peer' | 'rule' | 'send' | 'rtv';

export function newPublicId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}
