/** What a retrieve's record says when a C-MOVE did not bring everything (PS3.4 C.4.2.1.5). */
import { expect, it } from 'vitest';
import { moveProblem } from '#server/query-retrieve/runner.ts';

const report = (status: number, counts: Partial<{ completed: number; failed: number; warning: number }> = {}) => ({
  status,
  completed: counts.completed ?? 0,
  failed: counts.failed ?? 0,
  warning: counts.warning ?? 0,
  remaining: 0,
  errorComment: null,
});

it('names the fix for an unknown move destination, and the failed count for failed sub-operations', () => {
  expect(moveProblem(report(0xa801), 'PACS', 'MIA', 11112)).toBe("PACS does not know mia's AE title MIA as a move destination (status 0xA801): add MIA, this host and port 11112 to PACS's DICOM nodes");
  expect(moveProblem(report(0xb000, { completed: 3, failed: 2 }), 'PACS', 'MIA', 11112)).toMatch(/^2 instance\(s\) failed to arrive \(status 0xB000\)/);
  expect(moveProblem(report(0xa702), 'PACS', 'MIA', null)).toBe('PACS is out of resources (status 0xA702)');
  expect(moveProblem(report(0x0000), 'PACS', 'MIA', null)).toBe('PACS sent no instances');
  expect(moveProblem(report(0x0000, { completed: 4 }), 'PACS', 'MIA', null)).toBeNull();
});
