/**
 * Installed analysis models (GET /v1/models): what each is for, whether it may be used
 * clinically, how well it measured, and which one new analyses use. Admins select the model
 * (POST /v1/models/{id}/select); invalid models show why, naming the manifest field.
 */
import { useState } from 'react';
import type { Model } from '../api/types.ts';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { percent } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import type { Loaded } from '../use-load.ts';

export function ModelsScreen({ models }: { models: Loaded<Model[]> }) {
  const { client, me } = useSession();
  const canSelect = hasScope(me, 'manage:users');
  const [error, setError] = useState<unknown>(null);
  const [selecting, setSelecting] = useState<string | null>(null);

  const select = async (model: Model) => {
    setError(null);
    setSelecting(model.id);
    try {
      await client.post<Model>(`/v1/models/${encodeURIComponent(model.id)}/select`);
      models.reload();
    } catch (failure) {
      setError(failure);
    } finally {
      setSelecting(null);
    }
  };

  return (
    <section className="models" data-testid="models">
      <div className="toolbar">
        <h2>Models</h2>
        <span className="muted">New analyses use the selected model; earlier results keep the model that made them.</span>
        <span className="spacer" />
        <button type="button" onClick={models.reload}>
          Reload
        </button>
      </div>
      <InlineError error={error} />
      {models.state === 'loading' ? <Loading what="models" /> : null}
      {models.state === 'error' ? <ErrorState error={models.error} retry={models.reload} /> : null}
      {models.state === 'ready' && models.value.length === 0 ? (
        <Empty title="No model installed">
          Copy a model folder (model.onnx and its manifest.json) into the data folder&apos;s models/ and press Reload. Until then scans can be read but not analysed.
        </Empty>
      ) : null}
      {models.state === 'ready'
        ? models.value.map((model) => (
            <ModelCard key={model.id} model={model} canSelect={canSelect} selecting={selecting === model.id} onSelect={() => void select(model)} />
          ))
        : null}
      {models.state === 'ready' && models.value.length > 0 && !canSelect ? <p className="muted">Only an admin can change the selected model.</p> : null}
    </section>
  );
}

function ModelCard({ model, canSelect, selecting, onSelect }: { model: Model; canSelect: boolean; selecting: boolean; onSelect(): void }) {
  const metrics = model.metrics;
  return (
    <article className={`panel model${model.selected ? ' model-selected' : ''}`} data-testid="model" data-model-id={model.id} data-selected={String(model.selected)}>
      <div className="form-row model-head">
        <h3>
          {model.name ?? model.id} <span className="muted">v{model.version ?? '?'}</span>
        </h3>
        <span className="mono muted" title="Model id (its folder name)">
          {model.id}
        </span>
        <span className={`status ${model.status === 'ready' ? 'status-analyzed' : 'status-failed'}`} data-testid="model-status">
          {model.status}
        </span>
        {model.selected ? <span className="status status-reviewed">selected</span> : null}
        <span className="status">{model.source}</span>
        {model.not_for_clinical_use ? (
          <span className="model-tag" data-testid="not-for-clinical-use">
            NOT FOR CLINICAL USE
          </span>
        ) : model.not_for_clinical_use === false ? (
          <span className="muted">not flagged as research-only: check its clearance before clinical use</span>
        ) : null}
        <span className="spacer" />
        {canSelect && model.status === 'ready' && !model.selected ? (
          <button type="button" className="primary" onClick={onSelect} disabled={selecting} data-testid="select-model">
            {selecting ? 'Selecting…' : 'Use for new analyses'}
          </button>
        ) : null}
      </div>
      {model.error ? (
        <p className="inline-error" data-testid="model-error">
          Cannot be used: {model.error}
        </p>
      ) : null}
      {model.intended_use ? (
        <p>
          <b>Intended use:</b> {model.intended_use}
        </p>
      ) : null}
      {model.applies_to ? (
        <p className="muted">
          Applies to {model.applies_to.modalities.join(', ')}
          {model.applies_to.body_part ? ` · ${model.applies_to.body_part}` : ''} · at least {model.applies_to.min_slices} slices · {model.applies_to.image_types.join('/')}
          {model.applies_to.photometric ? ` · ${model.applies_to.photometric.join('/')}` : ''}
        </p>
      ) : null}
      {model.labels.length > 0 ? (
        <table className="grid compact" data-testid="model-metrics">
          <thead>
            <tr>
              <th>Label</th>
              <th>Threshold</th>
              <th title="How soon a finding of the label needs a reader: the worklist's priority">Triage</th>
              <th>Sensitivity</th>
              <th>False positives / series</th>
            </tr>
          </thead>
          <tbody>
            {model.labels.map((label) => {
              const measured = metrics?.per_label[label.label];
              return (
                <tr key={label.label} title={label.definition}>
                  <td>{label.display_name}</td>
                  <td className="num">{label.threshold.toFixed(2)}</td>
                  <td data-testid="model-label-urgency">{label.urgency}</td>
                  <td className="num">{measured?.sensitivity === null || measured === undefined ? '—' : percent(measured.sensitivity)}</td>
                  <td className="num">{measured ? measured.false_positives_per_series.toFixed(2) : '—'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
      {metrics ? (
        <p className="muted">
          Overall {metrics.false_positives_per_series.toFixed(2)} false positives per series · measured on {metrics.source}
        </p>
      ) : (
        <p className="muted">No published metrics.</p>
      )}
      {model.sha256 ? <p className="mono muted">sha256 {model.sha256}</p> : null}
    </article>
  );
}
