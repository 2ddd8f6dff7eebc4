/**
 * haproxy in front of the hub nodes: HTTP mode, each request to the node with the fewest in
 * flight (`balance leastconn`, as docs/hub.md recommends; MIA_HUB_BALANCE=roundrobin for plain
 * rotation, which on this machine's shared cores left one node's queue longer than the others':
 * answers up to 2.1 s at limit=500 against 0.8 s), keep-alive on both sides, in the foreground (-db) on a loopback port, with a CSV stats page to show how the
 * requests were spread.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../free-port.ts';

export type Haproxy = { url: string; child: ChildProcess; version: string; stats(): Promise<Map<string, number>> };


function findHaproxy(): string {
  for (const path of ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy']) if (existsSync(path)) return path;
  if (process.getuid?.() !== 0) throw new Error('haproxy missing: apt-get install -y haproxy');
  const install = spawnSync('apt-get', ['install', '-y', '-qq', 'haproxy'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (install.status !== 0 || !existsSync('/usr/sbin/haproxy')) throw new Error('apt-get install haproxy failed');
  return '/usr/sbin/haproxy';
}

export const BALANCE = process.env['MIA_HUB_BALANCE'] ?? 'leastconn';

export async function startHaproxy(dir: string, backends: readonly string[]): Promise<Haproxy> {
  const bin = findHaproxy();
  const version = (spawnSync(bin, ['-v'], { encoding: 'utf8' }).stdout.split('\n')[0] ?? '').replace(/^HAProxy version (\S+).*$/, '$1');
  const [port, statsPort] = [await freePort(), await freePort()];
  const config = join(dir, 'haproxy.cfg');
  const servers = backends.map((url, i) => `  server node${i + 1} ${new URL(url).host}`).join('\n');
  writeFileSync(
    config,
    `global
  maxconn 4096

defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 60s
  timeout server 60s

frontend hub
  bind 127.0.0.1:${port}
  default_backend nodes

backend nodes
  balance ${BALANCE}
${servers}

frontend stats
  bind 127.0.0.1:${statsPort}
  stats enable
  stats uri /stats
`,
  );
  const check = spawnSync(bin, ['-c', '-q', '-f', config], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`haproxy.cfg rejected: ${check.stderr}`);
  const child = spawn(bin, ['-db', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const statsUrl = `http://127.0.0.1:${statsPort}/stats;csv`;
  const stats = async (): Promise<Map<string, number>> => {
    const csv = await (await fetch(statsUrl)).text();
    const [header = '', ...rows] = csv.replace(/^# /, '').trim().split('\n');
    const columns = header.split(',');
    const [px, sv, ok] = ['pxname', 'svname', 'hrsp_2xx'].map((name) => columns.indexOf(name));
    const out = new Map<string, number>();
    for (const row of rows) {
      const cells = row.split(',');
      if (cells[px!] === 'nodes' && cells[sv!]?.startsWith('node')) out.set(cells[sv!]!, Number(cells[ok!]));
    }
    return out;
  };
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited ${child.exitCode}: ${stderr}`);
    try {
      await stats();
      break;
    } catch (error) {
      if (attempt > 100) throw new Error(`haproxy did not start: ${stderr}`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return { url: `http://127.0.0.1:${port}`, child, version, stats };
}
