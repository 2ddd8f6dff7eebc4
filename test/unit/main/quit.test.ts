/**
 * Quitting the desktop app, in order: the window closes first (no renderer request may meet a
 * stopping server or a revoked key), then the embedded server stops, then the app quits - and
 * the before-quit and window-all-closed events Electron fires on the way change nothing.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundledModelsDirs, electronSqliteBinding, electronSqliteDir } from '../../../main/desktop-paths.ts';
import { buildEnvironment } from '../../../main/native-sqlite.ts';
import { createQuitSequence } from '../../../main/quit.ts';

function harness(stopResult: 'ok' | 'fail' = 'ok') {
  const log: string[] = [];
  let finishStop: () => void = () => undefined;
  let failStop: (error: Error) => void = () => undefined;
  const sequence = createQuitSequence({
    closeWindows: () => log.push('close windows'),
    stopServer: () => {
      log.push('stop server');
      return new Promise<void>((resolve, reject) => {
        finishStop = () => {
          log.push('server stopped');
          resolve();
        };
        failStop = reject;
      });
    },
    quit: () => log.push('quit'),
    exit: (code) => log.push(`exit ${code}`),
  });
  const event = () => {
    const e = { prevented: false, preventDefault: () => (e.prevented = true) };
    return e;
  };
  return { log, sequence, event, finish: () => (stopResult === 'ok' ? finishStop() : failStop(new Error('disk full'))) };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('desktop quit sequence', () => {
  it('closes the window, then stops the server, then quits; repeated events do not interfere', async () => {
    const { log, sequence, event, finish } = harness();
    const first = event();
    sequence.beforeQuit(first);
    expect(first.prevented).toBe(true);
    expect(log).toEqual(['close windows', 'stop server']);
    expect(sequence.phase()).toBe('stopping');

    // Closing the window fires window-all-closed; a second quit request (Cmd+Q twice) comes too.
    sequence.allWindowsClosed();
    const second = event();
    sequence.beforeQuit(second);
    expect(second.prevented).toBe(true);
    expect(log).toEqual(['close windows', 'stop server']);

    finish();
    await settle();
    expect(log).toEqual(['close windows', 'stop server', 'server stopped', 'quit']);
    // Our own app.quit() runs before-quit once more: now it goes through.
    const last = event();
    sequence.beforeQuit(last);
    expect(last.prevented).toBe(false);
    expect(sequence.phase()).toBe('stopped');
  });

  it('closing the last window quits through the same sequence', () => {
    const { log, sequence } = harness();
    sequence.allWindowsClosed();
    expect(log).toEqual(['quit']);
  });

  it('exits with an error code when stopping fails, still after closing the window', async () => {
    const { log, sequence, event, finish } = harness('fail');
    sequence.beforeQuit(event());
    finish();
    await settle();
    expect(log).toEqual(['close windows', 'stop server', 'exit 1']);
  });
});

describe('desktop paths', () => {
  it('bundled models: the resources folder when packaged, the checkout\'s models/ in development', () => {
    expect(bundledModelsDirs({ packaged: true, resourcesPath: '/opt/mia/resources', bundleDir: '/opt/mia/resources/app.asar/dist-desktop' })).toEqual(['/opt/mia/resources/models']);
    expect(bundledModelsDirs({ packaged: false, resourcesPath: '/x/electron/resources', bundleDir: '/src/mia/dist-desktop' })).toEqual([join('/src/mia', 'models')]);
    // From this checkout's bundle folder: the real bundled model is there.
    const [dev] = bundledModelsDirs({ packaged: false, resourcesPath: '', bundleDir: join(import.meta.dirname, '..', '..', '..', 'dist-desktop') });
    expect(existsSync(join(dev!, 'mia-phantom-detector', 'manifest.json'))).toBe(true);
  });

  it('the Electron build of better-sqlite3 lives apart from the Node build, named by both versions', () => {
    const dir = electronSqliteDir('/src/mia', { sqlite: '12.11.1', runtime: 'electron', target: '40.10.2', platform: 'linux', arch: 'x64' });
    expect(dir).toBe('/src/mia/node_modules/.cache/mia-desktop/better-sqlite3-12.11.1-electron-40.10.2-linux-x64');
    expect(electronSqliteBinding(dir)).toBe(`${dir}/build/Release/better_sqlite3.node`);
    expect(electronSqliteBinding(dir)).not.toContain('node_modules/better-sqlite3/build');
  });

  it('the Electron build runs without npm settings that would point node-gyp at Node\'s headers', () => {
    const env = buildEnvironment({ PATH: '/usr/bin', npm_config_nodedir: '/usr', npm_config_target: '20.0.0', npm_config_cache: '/c', HOME: '/h' });
    expect(env).toEqual({ PATH: '/usr/bin', npm_config_cache: '/c', HOME: '/h' });
  });
});
