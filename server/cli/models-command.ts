/**
 * `mia models import-monai BUNDLE_DIR [--out DIR] [--id ID]`: a MONAI Bundle's ONNX export as a
 * mia model folder (server/analysis/monai-import.ts), by default <data>/models/<id>, where a
 * running server lists it at once. Prints what the admin must review before relying on it.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { importMonaiBundle } from '#server/analysis/monai-import.ts';
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
  // The id comes from the bundle unless given; the folder is only known after reading it, so a
  // default --out is checked for an existing model after the import chose its id.
  const result = await importMonaiBundle({
    bundleDir,
    id: options.id,
    outDir: options.out === undefined ? join(userModelsDir(options.dataDir), '.importing') : resolve(options.out),
  });
  let outDir = result.outDir;
  if (options.out === undefined) {
    const { rename, rm } = await import('node:fs/promises');
    outDir = join(userModelsDir(options.dataDir), result.manifest.id);
    if (existsSync(outDir)) {
      await rm(result.outDir, { recursive: true, force: true });
      throw new MiaError('conflict', `${outDir} exists: remove it, or pass --id or --out`);
    }
    await rename(result.outDir, outDir);
  }
  io.out(`imported ${result.manifest.name} ${result.manifest.version} as ${result.manifest.id} into ${outDir}`);
  io.out(`decoding ${result.manifest.output.decoding}, labels ${result.manifest.labels.map((l) => l.label).join(', ')}, sha256 ${result.manifest.file.sha256}`);
  io.out('');
  io.out('Review before use (edit manifest.json; mia lists the model at once, marked not for clinical use):');
  for (const item of result.review) io.out(`  - ${item}`);
  return 0;
}
