/**
 * Default scopes per role (PRODUCT.md, Access) and the scope check. Scopes are computed from
 * the role at every authentication (authenticate.ts), never stored with a key, so a change here
 * reaches existing keys at once.
 */
import type { GrantableScope, Role, Scope } from '#common/vocabulary.ts';

export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  // The spec's example lists only the reads, but the role exists for "scan analysis and
  // diagnostic reports": reviewing findings and writing reports is its work (issue 11).
  radiologist: ['read:scans', 'read:reports', 'write:reports'],
  data_engineer: ['read:scans', 'write:exports'],
  admin: ['*'],
};

export function effectiveScopes(role: Role, extra: readonly GrantableScope[]): Scope[] {
  const scopes = new Set<Scope>(ROLE_SCOPES[role]);
  if (!scopes.has('*')) for (const scope of extra) scopes.add(scope);
  return [...scopes];
}

/** Held by device keys alone: a person's key, an admin's included, never acts as a workstation. */
const DEVICE_ONLY: readonly Scope[] = ['sync:push', 'sync:pull'];

/** `*` holds every scope but the devices'; otherwise the scope must be held as such. */
export function holdsScope(held: readonly Scope[], needed: Scope): boolean {
  return held.includes(needed) || (held.includes('*') && !DEVICE_ONLY.includes(needed));
}

export function holdsAnyScope(held: readonly Scope[], needed: readonly Scope[]): boolean {
  return needed.some((scope) => holdsScope(held, scope));
}
