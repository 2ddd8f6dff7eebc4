/**
 * `mia models import-monai`: MONAI Bundles built here (configs/metadata.json, configs/
 * inference.json and the example classifier's ONNX as models/model.onnx) become mia model folders
 * a server lists as ready; bundles mia cannot run are refused naming the field that says so.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importMonaiBundle } from '#server/analysis/monai-import.ts';
import { loadManifest, verifyModelFile } from '#server/analysis/manifest.ts';
import { importFolder, phantomDicom, waitForJob } from '../analysis/analysis-helpers.ts';
import { SEED_TEST_BASE } from '../analysis/helpers.ts';
import { startTestServer } from '../helpers/server.ts';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const ONNX = join(import.meta.dirname, '../../example-models/mia-example-classifier/model.onnx');
const root = mkdtempSync(join(tmpdir(), 'mia-monai-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const metadata = (over: { image?: object; pred?: object; top?: object } = {}): object => ({
  schema: 'https://github.com/Project-MONAI/MONAI-extra-test-data/releases/download/0.8.1/meta_schema_20220324.json',
  version: '0.2',
  monai_version: '1.3.0',
  name: 'Phantom Lesion Classifier',
  task: 'Slice classification of synthetic head phantoms',
  description: 'A test bundle around an example model',
  intended_use: 'Testing only. NOT FOR CLINICAL USE.',
  data_source: 'Synthetic phantoms',
  data_type: 'dicom',
  references: ['none'],
  eval_metrics: { accuracy: 0.87 },
  network_data_format: {
    inputs: {
      image: { type: 'image', format: 'hounsfield', modality: 'CT', num_channels: 1, spatial_shape: [64, 64], dtype: 'float32', value_range: [0, 1], is_patch_data: false, channel_def: { '0': 'image' }, ...over.image },
    },
    outputs: {
      pred: { type: 'probabilities', format: 'classes', num_channels: 2, spatial_shape: [], dtype: 'float32', value_range: [0, 1], is_patch_data: false, channel_def: { '0': 'background', '1': 'Lesion present' }, ...over.pred },
    },
  },
  ...over.top,
});

const scaleRange = { _target_: 'ScaleIntensityRanged', keys: 'image', a_min: 0, a_max: 80, b_min: 0, b_max: 1, clip: true };

function bundle(name: string, meta: object, transforms: object[] | null = [scaleRange], onnx = true): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'configs'), { recursive: true });
  mkdirSync(join(dir, 'models'), { recursive: true });
  writeFileSync(join(dir, 'configs', 'metadata.json'), JSON.stringify(meta));
  if (transforms) {
    writeFileSync(
      join(dir, 'configs', 'inference.json'),
      JSON.stringify({ preprocessing: { _target_: 'Compose', transforms: [{ _target_: 'LoadImaged', keys: 'image' }, ...transforms, { _target_: 'EnsureTyped', keys: 'image' }] } }),
    );
  }
  if (onnx) cpSync(ONNX, join(dir, 'models', 'model.onnx'));
  return dir;
}

async function refusal(dir: string): Promise<string> {
  const out = join(root, `${dir.split('/').pop() ?? 'x'}-out`);
  try {
    await importMonaiBundle({ bundleDir: dir, outDir: out });
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('mia models import-monai', () => {
  it('imports a 2D classifier bundle into the data folder; a server lists it ready, not for clinical use', async () => {
    const t = await startTestServer();
    try {
      const dir = bundle('good', metadata());
      const run = spawnSync(process.execPath, [BIN, 'models', 'import-monai', dir, '--data', t.dataDir], { encoding: 'utf8', timeout: 120_000 });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout).toContain('as phantom-lesion-classifier into');
      // What MONAI cannot say is listed for review.
      expect(run.stdout).toMatch(/labels: lesion_present: code \(a placeholder, provisional\), threshold 0\.5 and urgency routine are defaults/);
      expect(run.stdout).toContain('output.score_activation: set to softmax_logits');
      const modelDir = join(t.dataDir, 'models', 'phantom-lesion-classifier');
      const m = await loadManifest(modelDir);
      await verifyModelFile(modelDir, m);
      expect(m).toMatchObject({
        version: '0.2.0',
        not_for_clinical_use: true,
        applies_to: { modalities: ['CT'] },
        input: { tensor: 'input', size: { height: 64, width: 64 }, normalisation: { CT: { kind: 'window', center: 40, width: 80, clip: [0, 1] } } },
        output: { decoding: 'classifier', tensor: 'scores', background_index: 0, channels: ['lesion_present'], score_activation: 'softmax_logits' },
        labels: [{ label: 'lesion_present', display_name: 'Lesion present', code: { provisional: true } }],
      });
      const listed = (await t.request('GET', '/v1/models')).json.data.items.find((x: { id: string }) => x.id === 'phantom-lesion-classifier');
      expect(listed).toMatchObject({ status: 'ready', source: 'user', not_for_clinical_use: true });
      // What the importer wrote runs: a phantom with a tumour analysed with it gives an image-level finding.
      const phantoms = join(root, 'phantoms');
      const [series] = await phantomDicom(root, 'phantoms', { seed: SEED_TEST_BASE + 7500, series: 1, kinds: 'tumor', size: 128, modality: 'CT' });
      await importFolder(t, phantoms);
      expect((await t.request('POST', '/v1/models/phantom-lesion-classifier/select', { body: {} })).status).toBeLessThan(300);
      const job = await t.request('POST', `/v1/scans/${series!.scan_uid}/analyses`, { body: {} });
      const done = await waitForJob(t, job.json.data.id);
      expect(done.status, done.reason).toBe('succeeded');
      const findings = (await t.request('GET', `/v1/scans/${series!.scan_uid}/results`)).json.data.findings as { localization: string; label: string }[];
      // softmax_logits over the example's softmax output compresses its scores, but keeps them above 0.5.
      expect(findings).toEqual([expect.objectContaining({ localization: 'image', label: 'lesion_present' })]);
      // Importing again does not overwrite the admin's reviewed folder.
      const again = spawnSync(process.execPath, [BIN, 'models', 'import-monai', dir, '--data', t.dataDir], { encoding: 'utf8', timeout: 120_000 });
      expect(again.status).toBe(1);
      expect(again.stderr).toMatch(/phantom-lesion-classifier exists: remove it, or pass --id or --out/);
      // Its staging folder is gone, and an --out that holds a model is refused too.
      expect(readdirSync(join(t.dataDir, 'models')).filter((n) => n.startsWith('.'))).toEqual([]);
      const over = spawnSync(process.execPath, [BIN, 'models', 'import-monai', dir, '--out', modelDir, '--data', t.dataDir], { encoding: 'utf8', timeout: 120_000 });
      expect(over.status).toBe(1);
      expect(over.stderr).toMatch(/already holds a model \(manifest\.json\)/);
    } finally {
      await t.close();
    }
  });

  it('maps percentile and min-max scaling; NormalizeIntensity is approximated and flagged', async () => {
    const percentile = await importMonaiBundle({
      bundleDir: bundle('pct', metadata({ image: { modality: 'MR', format: 'magnitude' } }), [{ _target_: 'monai.transforms.ScaleIntensityRangePercentilesd', lower: 1, upper: 99, b_min: 0, b_max: 1, clip: true }]),
      outDir: join(root, 'pct-out'),
      id: 'pct',
    });
    expect(percentile.manifest.input.normalisation).toEqual({ MR: { kind: 'percentile', low: 1, high: 99, clip: [0, 1] } });
    const z = await importMonaiBundle({ bundleDir: bundle('z', metadata(), [{ _target_: 'NormalizeIntensityd', keys: 'image' }]), outDir: join(root, 'z-out'), id: 'z' });
    expect(z.manifest.input.normalisation['CT']).toMatchObject({ kind: 'percentile', low: 0.5, high: 99.5 });
    expect(z.review.join('\n')).toMatch(/NormalizeIntensity \(a z-score\).*NOT what the model was trained on/);
    const written = JSON.parse(readFileSync(join(root, 'z-out', 'manifest.json'), 'utf8')) as { training_data: { bundle_eval_metrics: unknown } };
    expect(written.training_data.bundle_eval_metrics).toEqual({ accuracy: 0.87 });
  });

  it('refuses what mia cannot run, naming the field, and writes nothing', async () => {
    expect(await refusal(bundle('3d', metadata({ image: { spatial_shape: [96, 96, 96] } })))).toMatch(/^network_data_format\.inputs\.image\.spatial_shape: \[96,96,96\] is 3D/);
    expect(await refusal(bundle('rgb', metadata({ image: { num_channels: 3 } })))).toMatch(/^network_data_format\.inputs\.image\.num_channels: 3: mia runs single-channel models/);
    expect(await refusal(bundle('patch', metadata({ image: { is_patch_data: true } })))).toMatch(/^network_data_format\.inputs\.image\.is_patch_data/);
    expect(await refusal(bundle('any-size', metadata({ image: { spatial_shape: ['16*n', '16*n'] } })))).toMatch(/spatial_shape: .*fixed input size/);
    expect(await refusal(bundle('seg', metadata({ pred: { type: 'image', format: 'labels', spatial_shape: [64, 64] } })))).toMatch(/^network_data_format\.outputs\.pred\.type: "image"/);
    expect(await refusal(bundle('us', metadata({ image: { modality: 'US', format: 'magnitude' } })))).toMatch(/^network_data_format\.inputs\.image\.modality: "US"/);
    expect(await refusal(bundle('no-scaling', metadata(), null))).toMatch(/^configs\/inference\.json: no ScaleIntensityRange/);
    expect(await refusal(bundle('b-range', metadata(), [{ ...scaleRange, b_max: 255 }]))).toMatch(/ScaleIntensityRanged\.b_min\/b_max: \[0, 255\]/);
    expect(await refusal(bundle('no-onnx', metadata(), [scaleRange], false))).toMatch(/^models\/model\.onnx: not found/);
    expect(await refusal(bundle('no-shape', metadata({ top: { network_data_format: { inputs: {}, outputs: {} } } })))).toMatch(/^network_data_format\.inputs\.image: /);
    const broken = bundle('broken', metadata());
    writeFileSync(join(broken, 'models', 'model.onnx'), 'not an onnx file');
    expect(await refusal(broken)).toMatch(/^models\/model\.onnx: onnxruntime cannot load it/);
    const garbled = bundle('garbled', metadata());
    writeFileSync(join(garbled, 'configs', 'metadata.json'), '{"version": ');
    expect(await refusal(garbled)).toMatch(/^configs\/metadata\.json: not valid JSON/);
    expect(() => readFileSync(join(root, '3d-out', 'manifest.json'))).toThrow();
  });
});
