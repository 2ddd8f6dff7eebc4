/**
 * Installed models: the bundled models/<id>/ folders (beside the package, or the folders a host
 * such as Electron names in config.modelsDirs) and the folders a user drops into <data>/models/.
 * Each is an ONNX file plus manifest.json; a folder whose manifest does not validate or whose file
 * does not match its SHA-256 is listed with the reason and never used.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerConfig } from '#server/config.ts';
import { MiaError } from '#server/errors.ts';
import { ManifestError, loadManifest, verifyModelFile, type Manifest } from '#server/analysis/manifest.ts';
import type { TriageLabels } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';
import { getSetting, setSetting } from '#server/store/settings.ts';

export type ModelSource = 'bundled' | 'user';

export type ReadyModel = { status: 'ready'; id: string; dir: string; source: ModelSource; manifest: Manifest; modelPath: string };
export type InvalidModel = { status: 'invalid'; id: string; dir: string; source: ModelSource; error: string; manifest: Manifest | null };
export type InstalledModel = ReadyModel | InvalidModel;

/** The settings key holding the model an admin selected. */
export const SELECTED_MODEL_SETTING = 'analysis.selected_model';

/** models/ at the package root: server/analysis/ -> ../../models. */
const PACKAGED_MODELS = fileURLToPath(new URL('../../models', import.meta.url));

export function bundledModelDirs(config: Pick<ServerConfig, 'modelsDirs'>): readonly string[] {
  return config.modelsDirs ?? [PACKAGED_MODELS];
}

export function userModelsDir(dataDir: string): string {
  return join(dataDir, 'models');
}

type Checked = { signature: string; model: InstalledModel };

/** Hashing a model file costs ~10 ms per MB; redo it only when a file's size or time changes. */
const checkedFolders = new Map<string, Checked>();

/*
 * The folder listings and stats are synchronous on purpose: every analysis job lists the models
 * twice, and a handful of metadata calls on a local folder take ~0.25 ms in place, against
 * ~1 ms through the thread pool and up to 17 ms when its threads wait for a core that
 * inference and preprocessing keep busy (measured in the analysis benchmark).
 */
function signatureOf(dir: string): string {
  const entries = readdirSync(dir, { withFileTypes: true });
  const parts: string[] = [];
  for (const entry of entries.filter((e) => e.isFile()).sort((a, b) => a.name.localeCompare(b.name))) {
    const s = statSync(join(dir, entry.name));
    parts.push(`${entry.name}:${s.size}:${s.mtimeMs}`);
  }
  return parts.join('|');
}

function describeError(err: unknown, dir: string): string {
  if (err instanceof ManifestError) return err.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  const path = typeof err === 'object' && err !== null && 'path' in err ? String(err.path) : '';
  if (code === 'ENOENT') return path.endsWith('manifest.json') ? 'manifest.json: missing from the model folder' : `file.path: ${path.slice(dir.length + 1) || 'model file'} not found in the model folder`;
  return err instanceof Error ? err.message : 'unreadable model folder';
}

async function checkFolder(dir: string, folderName: string, source: ModelSource): Promise<InstalledModel> {
  let manifest: Manifest | null = null;
  try {
    manifest = await loadManifest(dir);
    // The folder name is the id users see and select; a mismatch would make two names for one model.
    if (manifest.id !== folderName) {
      throw new ManifestError([{ path: 'id', message: `expected ${folderName} (the folder name), got ${manifest.id}` }]);
    }
    const modelPath = await verifyModelFile(dir, manifest);
    return { status: 'ready', id: manifest.id, dir, source, manifest, modelPath };
  } catch (err) {
    return { status: 'invalid', id: folderName, dir, source, error: describeError(err, dir), manifest };
  }
}

function foldersIn(root: string): string[] {
  try {
    const entries = readdirSync(root, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name).sort();
  } catch {
    return [];
  }
}

/** Every installed model, bundled first; a user folder reusing a bundled id is invalid. */
export async function listInstalledModels(config: Pick<ServerConfig, 'modelsDirs' | 'dataDir'>): Promise<InstalledModel[]> {
  const roots: Array<{ root: string; source: ModelSource }> = [
    ...bundledModelDirs(config).map((root) => ({ root, source: 'bundled' as const })),
    { root: userModelsDir(config.dataDir), source: 'user' },
  ];
  const out: InstalledModel[] = [];
  for (const { root, source } of roots) {
    for (const name of foldersIn(root)) {
      const dir = join(root, name);
      let model: InstalledModel;
      try {
        const signature = signatureOf(dir);
        const cached = checkedFolders.get(dir);
        if (cached && cached.signature === signature) {
          model = cached.model;
        } else {
          model = await checkFolder(dir, name, source);
          checkedFolders.set(dir, { signature, model });
        }
      } catch (err) {
        model = { status: 'invalid', id: name, dir, source, error: describeError(err, dir), manifest: null };
      }
      if (out.some((m) => m.id === model.id)) {
        model = { status: 'invalid', id: model.id, dir, source, error: `id: ${model.id} is already installed (${source === 'user' ? 'bundled' : 'another folder'})`, manifest: model.manifest };
      }
      out.push(model);
    }
  }
  return out;
}

/** The admin's choice, else the configured default, else the first valid bundled model. */
export async function selectedModelId(db: Database, config: Pick<ServerConfig, 'defaultModelId'>, models: readonly InstalledModel[]): Promise<string | null> {
  const chosen = await getSetting(db, SELECTED_MODEL_SETTING) ?? config.defaultModelId;
  if (chosen) return chosen;
  return models.find((m) => m.status === 'ready' && m.source === 'bundled')?.id ?? models.find((m) => m.status === 'ready')?.id ?? null;
}

/** A usable model by id, or a clear reason why not. */
export function readyModel(models: readonly InstalledModel[], id: string | null): ReadyModel {
  if (id === null) throw new MiaError('conflict', 'No analysis model is installed', `put a model folder (ONNX + manifest.json) into the data folder's models/`);
  const model = models.find((m) => m.id === id);
  if (!model) throw new MiaError('not_found', 'Model not found', `no installed model with id ${id}; see GET /v1/models`);
  if (model.status === 'invalid') throw new MiaError('conflict', `Model ${id} is not usable`, model.error);
  return model;
}

export async function saveSelectedModel(db: Database, models: readonly InstalledModel[], id: string): Promise<ReadyModel> {
  const model = readyModel(models, id);
  await setSetting(db, SELECTED_MODEL_SETTING, model.id);
  return model;
}

/** Per-label urgency and name (worklist triage), stored with each analysis like its thresholds. */
export function triageLabelsOf(manifest: Manifest): TriageLabels {
  return Object.fromEntries(manifest.labels.map((l) => [l.label, { urgency: l.urgency, display_name: l.display_name }]));
}

