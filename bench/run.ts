/**
 * Runs every bench/*.bench.ts (or those named on the command line: `npm run bench -- api`) and
 * writes each returned markdown section into BENCHMARKS.md, replacing the section with the same
 * "## " heading and keeping the others. A last section records the machine and, per benchmark,
 * when it ran and the load average around it: a figure taken on a busy host is not comparable.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const DIR = import.meta.dirname;
const OUT = join(DIR, '..', 'BENCHMARKS.md');
const HEADER = '# Benchmarks\n\nMeasured on the project machine (2 cores, 24 GiB). Regenerate with `npm run bench`.\n';
const CONDITIONS = '## Machine and load';

function sections(markdown: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of markdown.split(/^(?=## )/m)) {
    if (!part.startsWith('## ')) continue;
    map.set(part.slice(0, part.indexOf('\n')).trim(), part.trimEnd() + '\n');
  }
  return map;
}

/** The rows of the conditions table kept from earlier runs, by benchmark name. */
function conditionRows(section: string | undefined): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of (section ?? '').split('\n')) {
    const name = /^\| `([a-z0-9-]+)` \|/.exec(line)?.[1];
    if (name) rows.set(name, line);
  }
  return rows;
}

function conditionsSection(rows: Map<string, string>): string {
  const gib = (bytes: number): string => (bytes / 2 ** 30).toFixed(1);
  return [
    CONDITIONS,
    '',
    `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${gib(totalmem())} GiB memory, Node ${process.version}, ${process.platform}. ` +
      'Load average is the 1-minute figure from /proc/loadavg just before and just after each benchmark; ' +
      'the benchmark\'s own processes raise it, other work on the host shows as a high "before".',
    '',
    '| benchmark | started (UTC) | took | load before | load after | free memory before |',
    '|---|---|---|---|---|---|',
    ...[...rows.keys()].sort().map((name) => rows.get(name) as string),
    '',
  ].join('\n');
}

const wanted = process.argv.slice(2);
const files = readdirSync(DIR)
  .filter((name) => name.endsWith('.bench.ts'))
  .filter((name) => wanted.length === 0 || wanted.includes(name.replace(/\.bench\.ts$/, '')))
  .sort();

const current = sections(existsSync(OUT) ? readFileSync(OUT, 'utf8') : '');
const conditions = conditionRows(current.get(CONDITIONS));
current.delete(CONDITIONS);
for (const file of files) {
  const name = file.replace(/\.bench\.ts$/, '');
  process.stderr.write(`bench: ${file}\n`);
  const started = new Date();
  const loadBefore = loadavg()[0] ?? 0;
  const freeBefore = freemem();
  const module = (await import(pathToFileURL(join(DIR, file)).href)) as { run?: () => Promise<string> };
  if (!module.run) throw new Error(`${file} exports no run()`);
  const section = await module.run();
  for (const [heading, text] of sections(section)) current.set(heading, text);
  const took = Math.round((Date.now() - started.getTime()) / 1000);
  conditions.set(
    name,
    `| \`${name}\` | ${started.toISOString().slice(0, 16).replace('T', ' ')} | ${took} s | ${loadBefore.toFixed(2)} | ${(loadavg()[0] ?? 0).toFixed(2)} | ${(freeBefore / 2 ** 30).toFixed(1)} GiB |`,
  );
  writeFileSync(OUT, [HEADER, ...current.values(), conditionsSection(conditions)].join('\n'));
}
process.stderr.write(`bench: wrote ${OUT}\n`);
