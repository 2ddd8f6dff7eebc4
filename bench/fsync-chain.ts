/**
 * What one DICOM association can reach on this disk while every answer waits for durability.
 * storescu sends the next instance only after the answer to the last, so a receiver's waits add
 * up in turn. Timed here, one instance after another, in the folder given:
 *   - mia's chain: the instance written under a temporary name and fsynced; renamed into place
 *     and its folder fsynced; a WAL-sized append (12 KiB, about what one instance's index commit
 *     adds) fdatasynced;
 *   - an intake log: the instance appended to one file and fdatasynced, all a receiver must do
 *     before answering if it indexes later (and replays the log after a crash).
 */
import { closeSync, fdatasyncSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setAside } from './set-aside.ts';

export type ChainProbe = {
  instances: number;
  fileMs: number;
  dirMs: number;
  walMs: number;
  chainMs: number;
  chainP90Ms: number;
  logMs: number;
  logP90Ms: number;
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;

export function probeFsyncChain(dir: string, instanceBytes: number, instances = 300): ChainProbe {
  mkdirSync(dir, { recursive: true });
  const body = Buffer.alloc(instanceBytes, 0x5a);
  const walFrame = Buffer.alloc(12 * 1024, 0x33);
  const file: number[] = [];
  const folder: number[] = [];
  const wal: number[] = [];
  const chain: number[] = [];
  const log: number[] = [];
  const walFd = openSync(join(dir, 'wal'), 'a');
  const logFd = openSync(join(dir, 'intake.log'), 'a');
  const dirFd = openSync(dir, 'r');
  try {
    for (let i = 0; i < instances; i++) {
      const t0 = performance.now();
      const temp = join(dir, `.${i}.tmp`);
      const fd = openSync(temp, 'wx');
      writeSync(fd, body);
      fsyncSync(fd);
      closeSync(fd);
      const t1 = performance.now();
      renameSync(temp, join(dir, `${i}.dcm`));
      fsyncSync(dirFd);
      const t2 = performance.now();
      writeSync(walFd, walFrame);
      fdatasyncSync(walFd);
      const t3 = performance.now();
      file.push(t1 - t0);
      folder.push(t2 - t1);
      wal.push(t3 - t2);
      chain.push(t3 - t0);
    }
    for (let i = 0; i < instances; i++) {
      const t0 = performance.now();
      writeSync(logFd, body);
      fdatasyncSync(logFd);
      log.push(performance.now() - t0);
    }
  } finally {
    closeSync(walFd);
    closeSync(logFd);
    closeSync(dirFd);
    setAside(dir);
  }
  return {
    instances,
    fileMs: median(file),
    dirMs: median(folder),
    walMs: median(wal),
    chainMs: median(chain),
    chainP90Ms: p90(chain),
    logMs: median(log),
    logP90Ms: p90(log),
  };
}
