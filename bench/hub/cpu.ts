/**
 * CPU time of processes and of the whole machine from /proc, to say where a run's time went.
 * A process tree counts its live descendants and, through cutime/cstime, the ones it reaped
 * (PostgreSQL's postmaster reaps every backend that exits).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

type Stat = { ppid: number; own: number; children: number };

function stat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After "pid (comm) ": state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), own: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

/** Seconds of CPU used so far by a process; with `tree`, also by its descendants, live or reaped. */
export function cpuSeconds(pid: number, tree = false): number {
  const root = stat(pid);
  if (!root) return 0;
  if (!tree) return root.own / CLK_TCK;
  let ticks = root.own + root.children;
  const byParent = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(Number(name));
    if (!s) continue;
    const list = byParent.get(s.ppid) ?? [];
    list.push(Number(name));
    byParent.set(s.ppid, list);
  }
  const walk = (parent: number): void => {
    for (const child of byParent.get(parent) ?? []) {
      ticks += stat(child)?.own ?? 0;
      walk(child);
    }
  };
  walk(pid);
  return ticks / CLK_TCK;
}

/** Seconds of CPU used by this process's children that have exited and been reaped (cutime + cstime). */
export function reapedChildrenSeconds(): number {
  return (stat(process.pid)?.children ?? 0) / CLK_TCK;
}

/** Orthanc's own process (test/helpers/orthanc.ts): the one whose command line names its storage folder's parent; 0 if none. */
export function orthancPid(storageDir: string): number {
  const dir = join(storageDir, '..');
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return 0;
}

/**
 * Machine-wide seconds of CPU (all cores): busy (user, nice, system, irq, softirq), of which irq
 * (interrupts and softirqs, loopback networking among them: charged to no process), idle (with
 * iowait), and steal (taken by the hypervisor).
 */
export function machineSeconds(): { busy: number; irq: number; idle: number; steal: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: (user + nice + system + irq + softirq) / CLK_TCK, irq: (irq + softirq) / CLK_TCK, idle: (idle + iowait) / CLK_TCK, steal: steal / CLK_TCK };
}
