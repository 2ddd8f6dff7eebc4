/** Default scopes per role (PRODUCT.md, Access) and the scope check. */
import type { GrantableScope, Role, Scope } from '#common/vocabulary.ts';

export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  radiologist: ['read:scans', 'read:reports'],
  data_engineer: ['read:scans', 'write:exports'],
  admin: ['*'],
};

export function effectiveScopes(role: Role, extra: readonly GrantableScope[]): Scope[] {
  const scopes = new Set<Scope>(ROLE_SCOPES[role]);
  if (!scopes.has('*')) for (const scope of extra) scopes.add(scope);
  return [...scopes];
}

/** `*` holds every scope; otherwise the scope must be held as such. */
export function holdsScope(held: readonly Scope[], needed: Scope): boolean {
  return held.includes('*') || held.includes(needed);
}

export function holdsAnyScope(held: readonly Scope[], needed: readonly Scope[]): boolean {
  return needed.some((scope) => holdsScope(held, scope));
}
