/** A benchmark's server process announces itself with one JSON line on stdout: its URL and key. */
import type { ChildProcess } from 'node:child_process';

/** The first line the child prints; rejects, with what it said on stderr, if it exits first. */
export function firstLine(child: ChildProcess, name: string, stderr: () => string = () => ''): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const end = out.indexOf('\n');
      if (end !== -1) resolve(out.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`${name} exited ${code}: ${stderr().trim()}`)));
  });
}
