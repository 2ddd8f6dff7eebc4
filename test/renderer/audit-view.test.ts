/** The Audit screen's action filter lists exactly what the server records. */
import { describe, expect, it } from 'vitest';
import { ROUTES } from '#server/http/routes/index.ts';
import { AUDIT_ACTIONS, reviewVerdict } from '../../renderer/src/audit-actions.ts';

describe('audit view', () => {
  it('the action filter matches the route table plus auth.failure, requests.throttled and routing.send', () => {
    const recorded = new Set(ROUTES.flatMap((route) => (route.audit ? [route.audit] : [])));
    recorded.add('auth.failure');
    recorded.add('requests.throttled');
    recorded.add('routing.send');
    expect([...AUDIT_ACTIONS].sort()).toEqual([...recorded].sort());
  });

  it('reads the verdict from the end of a findings.review target', () => {
    expect(reviewVerdict('finding:fnd_1 scan:1.2.3 review:accepted')).toBe('accepted');
    expect(reviewVerdict('finding:fnd_1 scan:1.2.3 review:rejected')).toBe('rejected');
    expect(reviewVerdict('finding:fnd_1 scan:1.2.3 review:cleared')).toBe('cleared');
    expect(reviewVerdict('finding:fnd_1')).toBeNull();
    expect(reviewVerdict('scan:1.2.3 review:maybe')).toBeNull();
    expect(reviewVerdict(null)).toBeNull();
  });
});
