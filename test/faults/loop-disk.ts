/**
 * A data folder on its own small ext4 file system, on a loop device, that a test can shut down
 * under a running server (FS_IOC_SHUTDOWN) and mount again (which replays its journal). Needs
 * root; every step returns why it failed, or null.
 */
import { run } from './serve-process.ts';

/**
 * FS_IOC_SHUTDOWN (_IOR('X', 125, __u32)), from python3 since Node has no ioctl. Flag 0
 * (FS_GOING_FLAGS_DEFAULT) writes out what was handed to the kernel first, then every operation
 * fails with EIO: an I/O error alone. Flag 2 (FS_GOING_FLAGS_NOLOGFLUSH) drops every write not
 * yet durable: a power cut, in effect.
 */
const SHUTDOWN = `
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x8004587D, struct.pack('I', int(sys.argv[2])))
`;

export type LoopDisk = {
  /** Why the disk could not be made (the tests then skip), or null. */
  unavailable: string | null;
  shutDown(how: 'io-error' | 'power-cut'): string | null;
  remount(): string | null;
  unmount(): void;
};

export function loopExt4(image: string, dir: string): LoopDisk {
  let mounted = false;
  const mount = (): string | null => {
    const failed = run('mount', ['-o', 'loop', image, dir]);
    mounted = failed === null;
    return failed;
  };
  const unavailable = run('truncate', ['-s', '64M', image]) ?? run('mkfs.ext4', ['-q', '-F', image]) ?? mount();
  return {
    unavailable,
    shutDown: (how) => run('python3', ['-c', SHUTDOWN, dir, how === 'power-cut' ? '2' : '0']),
    remount() {
      const failed = run('umount', [dir]);
      if (failed) return failed;
      mounted = false;
      return mount();
    },
    unmount() {
      if (mounted) run('umount', [dir]);
      mounted = false;
    },
  };
}
