/**
 * `mia models import-monai BUNDLE_DIR [--out DIR] [--id ID]`: a MONAI Bundle's ONNX export as a
 * mia model folder (server/analysis/monai-import.ts), by default <data>/models/<id>, where a
 * running server lists it at once. Prints what the admin must review before relying on it.
 */
import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { importMonaiBundle, type ImportResult } from '#server/analysis/monai-import.ts';
import { userModelsDir } from '#server/analysis/registry.ts';
import { MiaError } from '#server/errors.ts';

export type ModelsCommandIo = { out(line: string): void; err(line: string): void };

export async function modelsCommand(
  sub: string | undefined,
  args: readonly string[],
  options: { out?: string | undefined; id?: string | undefined; dataDir: string },
  io: ModelsCommandIo,
): Promise<number> {
  if (sub !== 'import-monai') throw new MiaError('invalid', 'models: expected import-monai BUNDLE_DIR');
  const [bundle, ...extra] = args;
  if (bundle === undefined || extra.length > 0) throw new MiaError('invalid', 'models import-monai: expected exactly one BUNDLE_DIR');
  const bundleDir = resolve(bundle);
  if (options.out !== undefined) {
    const out = resolve(options.out);
    if (existsSync(join(out, 'manifest.json'))) throw new MiaError('conflict', `${out} already holds a model (manifest.json): remove it or choose another --out`);
    return report(await importMonaiBundle({ bundleDir, id: options.id, outDir: out }), io);
  }
  // The id comes from the bundle unless given, so the folder is known only after reading it: the
  // import writes to a hidden folder (the registry skips dot folders) renamed into place, never
  // over a folder an admin may have reviewed.
  const models = userModelsDir(options.dataDir);
  const staging = join(models, `.importing-${process.pid}-${Date.now()}`);
  try {
    const result = await importMonaiBundle({ bundleDir, id: options.id, outDir: staging });
    const outDir = join(models, result.manifest.id);
    if (existsSync(outDir)) throw new MiaError('conflict', `${outDir} exists: remove it, or pass --id or --out`);
    await rename(staging, outDir);
    return report({ ...result, outDir }, io);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

function report(result: ImportResult, io: ModelsCommandIo): number {
  const outDir = result.outDir;
  io.out(`imported ${result.manifest.name} ${result.manifest.version} as ${result.manifest.id} into ${outDir}`);
  io.out(`decoding ${result.manifest.output.decoding}, labels ${result.manifest.labels.map((l) => l.label).join(', ')}, sha256 ${result.manifest.file.sha256}`);
  io.out('');
  io.out('Review before use (edit manifest.json; mia lists the model at once, marked not for clinical use):');
  for (const item of result.review) io.out(`  - ${item}`);
  return 0;
}
