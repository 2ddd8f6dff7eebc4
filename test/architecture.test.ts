/** Imports point one way (STYLE.md): renderer -> (HTTP) -> server; server never imports main,
 * renderer, Electron or React; common/ imports nothing outside itself. */
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' || name === 'dist' ? [] : sources(path);
    return /\.(ts|tsx)$/.test(name) ? [path] : [];
  });
}

function imports(file: string): { specifier: string; typeOnly: boolean }[] {
  const text = readFileSync(file, 'utf8');
  const found: { specifier: string; typeOnly: boolean }[] = [];
  for (const match of text.matchAll(/^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
    found.push({ specifier: match[3] ?? '', typeOnly: Boolean(match[2]) });
  }
  for (const match of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ specifier: match[1] ?? '', typeOnly: false });
  return found;
}

function violations(dir: string, forbidden: RegExp, allowTypeOnly = false): string[] {
  return sources(join(ROOT, dir)).flatMap((file) =>
    imports(file)
      .filter((i) => forbidden.test(i.specifier) && !(allowTypeOnly && i.typeOnly))
      .map((i) => `${relative(ROOT, file)} imports ${i.specifier}`),
  );
}

describe('dependency direction', () => {
  it('server/ imports no Electron, React, main or renderer code', () => {
    expect(violations('server', /^(electron|react|react-dom)(\/|$)|^#(main|renderer)\/|\.\.\/(main|renderer)\//)).toEqual([]);
  });

  it('renderer/ imports no server or main code', () => {
    expect(violations('renderer', /^#(server|main)\/|\/server\/|\/main\/|^(better-sqlite3|onnxruntime-node|express)$/)).toEqual([]);
  });

  it('common/ imports nothing outside itself', () => {
    // Its modules may share a definition (measure.ts uses pixel-spacing.ts's units) but reach no
    // package and no other folder, so server and renderer can both take them as they are.
    expect(violations('common', /^(?!\.\/[\w.-]+$)/)).toEqual([]);
  });

  it('SQL stays in the store layer', () => {
    // No statement text outside server/store, on either backend: no string that opens with a
    // statement's keyword, and no raw connection calls (issue 12).
    const offenders = sources(join(ROOT, 'server'))
      .filter((file) => !file.includes(`${join('server', 'store')}`))
      .filter((file) =>
        /\b(db|tx|connection|client|pool)\.(prepare|exec|query)\(|['"`]\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|LISTEN|NOTIFY|BEGIN|WITH|PRAGMA|VACUUM)\b/.test(readFileSync(file, 'utf8')),
      )
      .map((file) => relative(ROOT, file));
    expect(offenders).toEqual([]);
  });

  it('server code uses the raw SQLite connection for pragmas only', () => {
    // A write through it would go uncounted by readVersion, and kept answers
    // (server/http/shared-answers.ts) would outlive it.
    const offenders = sources(join(ROOT, 'server'))
      .filter((file) => !file.endsWith(join('server', 'store', 'sqlite.ts')))
      .flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/\.connection\.(\w+)/g)].filter((m) => !['pragma', 'open', 'name'].includes(m[1] ?? '')).map((m) => `${relative(ROOT, file)}: .connection.${m[1]}`));
    expect(offenders).toEqual([]);
  });

  it('only the scan lifecycle writes a scan status', () => {
    // One owner of the state machine's moves (issue 12): the store's writer is called from
    // server/scans/lifecycle.ts alone, and no other store statement sets scans.status.
    const writers = sources(join(ROOT, 'server'))
      .filter((file) => /\bsetScanStatus\b/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(ROOT, file))
      .sort();
    expect(writers).toEqual(['server/scans/lifecycle.ts', 'server/store/scans.ts']);
    const statusSql = sources(join(ROOT, 'server'))
      .filter((file) => /UPDATE\s+scans\s+SET[^'"`]*\bstatus\s*=/i.test(readFileSync(file, 'utf8')))
      .map((file) => relative(ROOT, file));
    expect(statusSql).toEqual(['server/store/scans.ts']);
  });

  it('long-lived parts live in the runtime, not in registries keyed by an object', () => {
    // server/runtime.ts builds and owns them (issue 12); a WeakMap keyed by Services or the
    // runtime would be a second, hidden owner with no place in the stop order.
    const registries = sources(join(ROOT, 'server'))
      .filter((file) => /new WeakMap<\s*(Services|Runtime)\b/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(ROOT, file));
    expect(registries).toEqual([]);
  });

  it('only server/jobs claims jobs and judges their owners', () => {
    // One set of rules for who runs a job (issue 12): the store's claim statements are called
    // from server/jobs alone, and no other module probes owner pids or keeps its own registry.
    const using = (pattern: RegExp) =>
      sources(join(ROOT, 'server'))
        .filter((file) => !file.includes(join('server', 'store')) && pattern.test(readFileSync(file, 'utf8')))
        .map((file) => relative(ROOT, file))
        .sort();
    expect(using(/\b(claimQueuedAnalysis|claimNextQueuedAnalysis|reclaimImportJob|claimNextDueSend)\b/)).toEqual(['server/jobs/jobs.ts']);
    expect(using(/process\.kill\(\s*\w+\s*,\s*0\s*\)|STALE_HEARTBEAT_MS\s*=/)).toEqual(['server/jobs/jobs.ts']);
  });
});

/** The modules `entry` loads when it runs: its imports that are not type-only, followed through the project's own files. */
function runtimeGraph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    for (const { specifier, typeOnly } of imports(file)) {
      if (typeOnly) continue;
      const alias = /^#(server|common)\/(.+)$/.exec(specifier);
      if (alias) visit(join(ROOT, alias[1] ?? '', alias[2] ?? ''));
      else if (specifier.startsWith('.')) visit(join(file, '..', specifier));
      else packages.add(specifier);
    }
  };
  visit(join(ROOT, entry));
  return { files, packages };
}

describe('what worker threads load', () => {
  it('an export worker loads neither zod nor the API schemas', () => {
    // Each export thread is a heap of its own: zod and the API's schemas were ~6 MB of each one's
    // 12.5 MB at start, and the collector lets a heap grow in proportion to what it holds (issue 15's
    // export of 1,000,000 findings under 200 MB). The store's JSON is checked by stored-json.ts.
    const graph = runtimeGraph('server/exports/export-worker.ts');
    expect(graph.files.size).toBeGreaterThan(10);
    expect([...graph.packages].filter((p) => p === 'zod' || p.startsWith('zod/'))).toEqual([]);
    expect([...graph.files].map((f) => relative(ROOT, f)).filter((f) => f.startsWith('server/api/'))).toEqual([]);
  });
});
