/**
 * The code a worker thread evaluates to load its module. From source (tsx, vitest) it registers
 * tsx first and imports the .ts beside the caller; compiled (dist/cli by bin/compiled-cli.mjs, the
 * desktop bundle by main/build.ts) it imports the .mjs built beside the caller's chunk, from the
 * unpacked copy when inside the desktop app's asar archive (a worker starts from a real file:
 * electron-builder.yml).
 */
export function workerBootstrap(callerUrl: string, name: string): string {
  if (callerUrl.endsWith('.ts')) {
    const entry = JSON.stringify(new URL(`./${name}.ts`, callerUrl).href);
    return `import('tsx/esm/api').then(({ register }) => { register(); return import(${entry}); });`;
  }
  const entry = new URL(`./${name}.mjs`, callerUrl).href.replace('/app.asar/', '/app.asar.unpacked/');
  return `import(${JSON.stringify(entry)});`;
}
