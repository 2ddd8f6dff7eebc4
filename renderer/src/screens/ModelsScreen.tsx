/**
 * Installed analysis models (GET /v1/models): what each is for, whether it may be used
 * clinically, how well it measured, and which one new analyses use. Admins select the model
 * (POST /v1/models/{id}/select) and the site's operating point (POST /v1/models/{id}/operating-point);
 * invalid models show why, naming the manifest field. Each model's card, held-out figures, FROC
 * curve and reliability diagram come from its manifest.
 */
import { useState } from 'react';
import type { Model, OperatingPoint } from '../api/types.ts';
import { FrocChart, ReliabilityChart } from '../components/ModelCharts.tsx';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { percent } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import type { Loaded } from '../use-load.ts';

export function ModelsScreen({ models }: { models: Loaded<Model[]> }) {
  const { client, me } = useSession();
  const canSelect = hasScope(me, 'manage:users');
  const [error, setError] = useState<unknown>(null);
  const [selecting, setSelecting] = useState<string | null>(null);

  const choosePoint = async (model: Model, point: OperatingPoint) => {
    setError(null);
    setSelecting(model.id);
    try {
      await client.post<Model>(`/v1/models/${encodeURIComponent(model.id)}/operating-point`, { body: { name: point.name } });
      models.reload();
    } catch (failure) {
      setError(failure);
    } finally {
      setSelecting(null);
    }
  };

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
            <ModelCard
              key={model.id}
              model={model}
              canSelect={canSelect}
              selecting={selecting === model.id}
              onSelect={() => void select(model)}
              onChoosePoint={(point) => void choosePoint(model, point)}
            />
          ))
        : null}
      {models.state === 'ready' && models.value.length > 0 && !canSelect ? <p className="muted">Only an admin can change the selected model.</p> : null}
    </section>
  );
}

type CardProps = { model: Model; canSelect: boolean; selecting: boolean; onSelect(): void; onChoosePoint(point: OperatingPoint): void };

function ModelCard({ model, canSelect, selecting, onSelect, onChoosePoint }: CardProps) {
  const metrics = model.metrics;
  // The thresholds new analyses use: the site's operating point's, else the labels' own.
  const inUse = model.operating_points.find((p) => p.selected);
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
              <th title="At the operating point in use, when the model offers points">Threshold</th>
              <th title="How soon a finding of the label needs a reader: the worklist's priority">Triage</th>
              {/* With held-out figures below, these are the training generator's own test seeds: say so. */}
              <th>{metrics?.heldout ? 'Sensitivity (own phantoms)' : 'Sensitivity'}</th>
              <th>{metrics?.heldout ? 'False positives / series (own phantoms)' : 'False positives / series'}</th>
            </tr>
          </thead>
          <tbody>
            {model.labels.map((label) => {
              const measured = metrics?.per_label[label.label];
              return (
                <tr key={label.label} title={label.definition}>
                  <td>{label.display_name}</td>
                  <td className="num" data-testid="model-label-threshold">{(inUse?.thresholds[label.label] ?? label.threshold).toFixed(2)}</td>
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
          {metrics.heldout ? ' (test seeds of the generator it trained on; the held-out figures below are the honest ones)' : ''}
        </p>
      ) : (
        <p className="muted">No published metrics.</p>
      )}
      {model.card ? <CardFacts card={model.card} /> : null}
      {model.operating_points.length > 0 ? (
        <OperatingPoints model={model} canChoose={canSelect && model.status === 'ready'} busy={selecting} onChoose={onChoosePoint} />
      ) : null}
      {metrics?.heldout ? <HeldoutFigures model={model} heldout={metrics.heldout} /> : null}
      {model.sha256 ? <p className="mono muted">sha256 {model.sha256}</p> : null}
    </article>
  );
}

function CardFacts({ card }: { card: NonNullable<Model['card']> }) {
  return (
    <dl className="model-card-facts" data-testid="model-card">
      {card.users ? (
        <>
          <dt>Users</dt>
          <dd>{card.users}</dd>
        </>
      ) : null}
      <dt>Training data</dt>
      <dd>{card.training_data}</dd>
      <dt>Evaluation</dt>
      <dd>{card.evaluation}</dd>
      <dt>Limits</dt>
      <dd>
        <ul className="model-limitations" data-testid="model-limitations">
          {card.limitations.map((l) => (
            <li key={l}>{l}</li>
          ))}
        </ul>
      </dd>
      {card.references.length > 0 ? (
        <>
          <dt>References</dt>
          <dd>{card.references.join('; ')}</dd>
        </>
      ) : null}
    </dl>
  );
}

const fixed = (v: number | null | undefined, digits = 2): string => (v === null || v === undefined ? '—' : v.toFixed(digits));

function OperatingPoints({ model, canChoose, busy, onChoose }: { model: Model; canChoose: boolean; busy: boolean; onChoose(point: OperatingPoint): void }) {
  return (
    <div data-testid="operating-points">
      <h4>
        Operating point <span className="muted">(thresholds for new analyses; figures on held-out data they were not chosen on)</span>
      </h4>
      <table className="grid compact operating-points">
        <thead>
          <tr>
            <th>Point</th>
            <th>Thresholds</th>
            <th className="num">Sensitivity</th>
            <th className="num">False positives / series</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {model.operating_points.map((p) => (
            <tr key={p.name} data-testid="operating-point" data-name={p.name} data-selected={String(p.selected)} title={p.measured?.on}>
              <td>
                <b>{p.display_name}</b>
                {p.selected ? <span className="status status-reviewed">in use</span> : null}
                <div className="muted">{p.description}</div>
              </td>
              <td>
                {model.labels.map((l) => (
                  <div key={l.label}>
                    {l.display_name} {fixed(p.thresholds[l.label])}
                  </div>
                ))}
              </td>
              <td className="num">{p.measured?.sensitivity === null || p.measured === null ? '—' : percent(p.measured.sensitivity)}</td>
              <td className="num">{fixed(p.measured?.false_positives_per_series)}</td>
              <td>
                {canChoose && !p.selected ? (
                  <button type="button" onClick={() => onChoose(p)} disabled={busy} data-testid="choose-operating-point">
                    Use this point
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!canChoose ? <p className="muted">Only an admin can change the operating point.</p> : null}
    </div>
  );
}

const RATES = ['0.25', '0.5', '1', '2'];

function HeldoutFigures({ model, heldout }: { model: Model; heldout: NonNullable<NonNullable<Model['metrics']>['heldout']> }) {
  const rows: { name: string; at: Record<string, number | null> }[] = [
    { name: `All labels (${heldout.lesions} lesions)`, at: heldout.sensitivity_at },
    ...model.labels.map((l) => ({ name: `${l.display_name} (${heldout.per_label[l.label]?.lesions ?? 0})`, at: heldout.per_label[l.label]?.sensitivity_at ?? {} })),
    ...Object.entries(heldout.per_modality).map(([m, v]) => ({ name: `${m} (${v.series} series, ${v.lesions} lesions)`, at: v.sensitivity_at })),
  ];
  return (
    <div data-testid="model-heldout">
      <h4>
        Held-out evaluation <span className="muted">({heldout.series} series from {heldout.family})</span>
      </h4>
      <table className="grid compact">
        <thead>
          <tr>
            <th>Sensitivity at false positives / series</th>
            {RATES.map((r) => (
              <th key={r} className="num">
                {r}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.name}>
              <td>{r.name}</td>
              {RATES.map((rate) => (
                <td key={rate} className="num">
                  {fixed(r.at[rate], 3)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted">
        Expected calibration error {heldout.expected_calibration_error.toFixed(3)}
        {model.calibration ? ` · confidences calibrated (${model.calibration.method}) on ${model.calibration.fitted_on}` : ' · raw model scores, not calibrated'}
      </p>
      <div className="model-evaluation">
        <figure>
          <FrocChart froc={heldout.froc} points={model.operating_points} />
          <figcaption className="muted">FROC: lesions found against false positives per series; dots are the operating points</figcaption>
        </figure>
        <figure>
          <ReliabilityChart bins={heldout.reliability} />
          <figcaption className="muted">Reliability: how often findings of a confidence were right (dashed: perfect)</figcaption>
        </figure>
      </div>
    </div>
  );
}
