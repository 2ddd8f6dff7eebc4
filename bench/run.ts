/**
 * Runs every bench/*.bench.ts (or those named on the command line: `npm run bench -- api`) and
 * writes each returned markdown section into BENCHMARKS.md, replacing the section with the same
 * "## " heading and keeping the others.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const DIR = import.meta.dirname;
const OUT = join(DIR, '..', 'BENCHMARKS.md');
const HEADER = '# Benchmarks\n\nMeasured on the project machine (2 cores, 24 GiB). Regenerate with `npm run bench`.\n';

function sections(markdown: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of markdown.split(/^(?=## )/m)) {
    if (!part.startsWith('## ')) continue;
    map.set(part.slice(0, part.indexOf('\n')).trim(), part.trimEnd() + '\n');
  }
  return map;
}

const wanted = process.argv.slice(2);
const files = readdirSync(DIR)
  .filter((name) => name.endsWith('.bench.ts'))
  .filter((name) => wanted.length === 0 || wanted.includes(name.replace(/\.bench\.ts$/, '')))
  .sort();

const current = sections(existsSync(OUT) ? readFileSync(OUT, 'utf8') : '');
for (const file of files) {
  process.stderr.write(`bench: ${file}\n`);
  const module = (await import(pathToFileURL(join(DIR, file)).href)) as { run?: () => Promise<string> };
  if (!module.run) throw new Error(`${file} exports no run()`);
  const section = await module.run();
  for (const [heading, text] of sections(section)) current.set(heading, text);
  writeFileSync(OUT, [HEADER, ...current.values()].join('\n'));
}
process.stderr.write(`bench: wrote ${OUT}\n`);
