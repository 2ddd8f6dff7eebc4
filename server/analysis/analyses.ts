/** What the analysis and model routes do: list and select models, the glossary, jobs. */
import { setTimeout as sleep } from 'node:timers/promises';
import type { AnalysisJob, Model } from '#server/api/analysis-schemas.ts';
import type { Label } from '#server/api/schemas.ts';
import { isTerminal, type AnalysisQueue } from '#server/analysis/analysis-queue.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import { decisionOf, operatingPointSetting, saveOperatingPoint } from '#server/analysis/operating-points.ts';
import { listInstalledModels, readyModel, saveSelectedModel, selectedModelId, type InstalledModel } from '#server/analysis/registry.ts';
import { notFound } from '#server/errors.ts';
import { BUILTIN_LABELS } from '#server/labels/glossary.ts';
import type { Services } from '#server/services.ts';

/** Requests that queue, cancel or follow a job need the runtime's analysis queue. */
export type QueueDeps = Services & { analyses: AnalysisQueue };
import { findFindingsByAnalyses } from '#server/store/analyses.ts';
import { getSetting } from '#server/store/settings.ts';
import { mapInOrder } from '#server/in-order.ts';
import { findAnalysisJob, findAnalysisJobById, type AnalysisJobRow } from '#server/store/analysis-jobs.ts';

const FOLLOW_POLL_MS = 200;

function toCard(manifest: Manifest): NonNullable<Model['card']> {
  const heldout = manifest.metrics.heldout;
  const series = manifest.training_data['series'];
  return {
    intended_use: manifest.intended_use,
    users: manifest.card?.users ?? null,
    training_data: typeof series === 'number' ? `${manifest.training_data.description} (${series} series)` : manifest.training_data.description,
    limitations: manifest.card?.limitations ?? (manifest.not_for_clinical_use ? ['Not for clinical use.'] : []),
    evaluation: heldout
      ? `${heldout.series} series with ${heldout.lesions} lesions from ${heldout.family}, a generator the model never trained on`
      : `Figures from ${manifest.metrics.source}`,
    references: manifest.card?.references ?? [],
  };
}

function toOperatingPoints(manifest: Manifest, chosen: string | null): Model['operating_points'] {
  return (manifest.operating_points ?? []).map((p) => ({
    name: p.name,
    display_name: p.display_name,
    description: p.description,
    thresholds: p.thresholds,
    measured: p.measured ?? null,
    selected: p.name === chosen,
  }));
}

function toModel(m: InstalledModel, selected: string | null, chosenPoint: string | null): Model {
  const manifest = m.manifest;
  const point = manifest ? decisionOf(manifest, chosenPoint).operatingPoint : null;
  return {
    id: m.id,
    name: manifest?.name ?? null,
    version: manifest?.version ?? null,
    sha256: manifest?.file.sha256 ?? null,
    source: m.source,
    intended_use: manifest?.intended_use ?? null,
    not_for_clinical_use: manifest?.not_for_clinical_use ?? null,
    applies_to: manifest
      ? {
          modalities: [...manifest.applies_to.modalities],
          body_part: manifest.applies_to.body_part ?? null,
          min_slices: manifest.applies_to.min_slices,
          image_types: manifest.applies_to.image_types,
          photometric: manifest.applies_to.photometric ? [...manifest.applies_to.photometric] : null,
        }
      : null,
    labels: (manifest?.labels ?? []).map((l) => ({
      label: l.label,
      display_name: l.display_name,
      definition: l.definition,
      code: { system: l.code.system, value: l.code.value, meaning: l.code.meaning },
      threshold: l.threshold,
      urgency: l.urgency,
    })),
    metrics: manifest
      ? {
          source: manifest.metrics.source,
          false_positives_per_series: manifest.metrics.false_positives_per_series,
          per_label: Object.fromEntries(
            Object.entries(manifest.metrics.per_label).map(([label, v]) => [label, { sensitivity: v.sensitivity, false_positives_per_series: v.false_positives_per_series }]),
          ),
          expected_calibration_error: manifest.metrics.heldout?.expected_calibration_error ?? manifest.metrics.expected_calibration_error ?? null,
          heldout: manifest.metrics.heldout ?? null,
        }
      : null,
    card: manifest ? toCard(manifest) : null,
    calibration: manifest?.calibration ? { method: manifest.calibration.method, fitted_on: manifest.calibration.fitted_on } : null,
    operating_points: manifest ? toOperatingPoints(manifest, point) : [],
    operating_point: point,
    status: m.status,
    error: m.status === 'invalid' ? m.error : null,
    selected: m.id === selected && m.status === 'ready',
  };
}

async function chosenPoint(services: Services, id: string): Promise<string | null> {
  return await getSetting(services.db, operatingPointSetting(id)) ?? null;
}

export async function listModels(services: Services): Promise<Model[]> {
  const models = await listInstalledModels(services.config);
  const selected = await selectedModelId(services.db, services.config, models);
  return await mapInOrder(models, async (m) => toModel(m, selected, await chosenPoint(services, m.id)));
}

export async function selectModel(services: Services, id: string): Promise<Model> {
  const models = await listInstalledModels(services.config);
  const model = await saveSelectedModel(services.db, models, id);
  return toModel(model, model.id, await chosenPoint(services, model.id));
}

/** The site's operating point for a model: new analyses with it use that point's thresholds. */
export async function chooseOperatingPoint(services: Services, id: string, name: string): Promise<Model> {
  const models = await listInstalledModels(services.config);
  const model = readyModel(models, id);
  await saveOperatingPoint(services.db, model, name);
  return toModel(model, await selectedModelId(services.db, services.config, models), name);
}

/**
 * The glossary: labels of the installed valid models, the selected model's first. The built-in
 * list stands in only when no model is installed, so a label never lacks a definition.
 */
export async function glossary(services: Services): Promise<Label[]> {
  const models = await listInstalledModels(services.config);
  const selected = await selectedModelId(services.db, services.config, models);
  const ready = models.filter((m) => m.status === 'ready').sort((a, b) => Number(b.id === selected) - Number(a.id === selected));
  const labels = new Map<string, Label>();
  for (const m of ready) {
    for (const l of m.manifest?.labels ?? []) {
      if (!labels.has(l.label)) {
        labels.set(l.label, { label: l.label, display_name: l.display_name, definition: l.definition, code: { system: l.code.system, value: l.code.value, meaning: l.code.meaning } });
      }
    }
  }
  return labels.size > 0 ? [...labels.values()] : [...BUILTIN_LABELS];
}

export function toAnalysisJob(row: AnalysisJobRow, findings: number | null): AnalysisJob {
  return {
    id: row.public_id,
    scan_id: row.scan_id,
    status: row.status,
    model: { id: row.model_id, name: row.model_name, version: row.model_version, sha256: row.model_sha256 },
    thresholds: JSON.parse(row.thresholds) as Record<string, number>,
    progress: { slices_done: row.slices_done, slices_total: row.slices_total },
    reason: row.error,
    recommendation: row.recommendation,
    findings,
    requested_by: row.requested_by,
    created_at: row.created_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
  };
}

export async function analysisView(services: Services, row: AnalysisJobRow): Promise<AnalysisJob> {
  const findings = row.status === 'succeeded' ? ((await findFindingsByAnalyses(services.db, [row.id])).get(row.id)?.length ?? 0) : null;
  return toAnalysisJob(row, findings);
}

async function jobRow(services: Services, id: string): Promise<AnalysisJobRow> {
  const row = await findAnalysisJob(services.db, id);
  if (!row) throw notFound('Analysis', id);
  return row;
}

export type JobWithPatient = { job: AnalysisJob; patientId: string };

export async function requestAnalysis(services: QueueDeps, scanId: string, modelId: string | undefined, requestedBy: string): Promise<JobWithPatient> {
  const row = await services.analyses.enqueue(scanId, { modelId, requestedBy });
  return { job: await analysisView(services, row), patientId: row.patient_id };
}

export async function getAnalysis(services: Services, id: string): Promise<JobWithPatient> {
  const row = await jobRow(services, id);
  return { job: await analysisView(services, row), patientId: row.patient_id };
}

export async function cancelAnalysis(services: QueueDeps, id: string): Promise<JobWithPatient> {
  const row = await services.analyses.cancel(id);
  return { job: await analysisView(services, row), patientId: row.patient_id };
}

type Sink = { send(event: string, data: unknown): void; signal: AbortSignal };

/** Terminal status -> event name: `done` for a result, else the status itself. */
const END_EVENT: Record<string, string> = { succeeded: 'done', failed: 'failed', not_applicable: 'not_applicable', cancelled: 'cancelled' };

/**
 * Follows a job from the database, so a job run by `mia analyze` in another process is
 * followed the same way: `queued` while it waits, `progress` as slices are done, then one of
 * done, failed, not_applicable or cancelled with the job, and the stream ends.
 */
export async function analysisEvents(services: QueueDeps, id: string): Promise<(sink: Sink) => Promise<void>> {
  const first = await jobRow(services, id);
  return async ({ send, signal }) => {
    let last = '';
    const progress = (status: string, done: number, total: number | null): void => {
      const signature = `${status}:${done}:${total ?? ''}`;
      if (signature === last) return;
      last = signature;
      send(status === 'queued' ? 'queued' : 'progress', { id: first.public_id, status, slices_done: done, slices_total: total });
    };
    // A job run by this process reports every batch as it happens; the database poll covers
    // jobs run by other processes, and the status changes.
    const unsubscribe = services.analyses.onProgress(first.id, ({ done, total }) => progress('running', done, total));
    try {
      for (;;) {
        const row = await findAnalysisJobById(services.db, first.id) ?? first;
        if (isTerminal(row.status)) {
          send(END_EVENT[row.status] ?? 'done', await analysisView(services, row));
          return;
        }
        progress(row.status, row.slices_done, row.slices_total);
        try {
          await sleep(FOLLOW_POLL_MS, undefined, { signal });
        } catch {
          return;
        }
      }
    } finally {
      unsubscribe();
    }
  };
}
