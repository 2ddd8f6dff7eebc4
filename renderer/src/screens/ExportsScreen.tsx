/**
 * Exports for data engineers: create with filters, format and de-identification; list; download.
 * The label filter offers the glossary (GET /v1/labels) by display name and sends the label
 * itself (`tumor_detected`), which is what the server filters on; the minimum confidence is
 * checked here (0 to 1) so a typo is explained before anything is sent.
 */
import { useState, type FormEvent } from 'react';
import { EXPORT_FORMATS, type ExportFormat } from '../../../common/vocabulary.ts';
import type { ExportFilters, ExportRecord, Label, Page } from '../api/types.ts';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { minConfidenceProblem } from '../export-filters.ts';
import { bytes, dateTime, saveBlob } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';

export function ExportsScreen() {
  const { client, me } = useSession();
  const list = useLoad((signal) => client.all<ExportRecord>('/v1/exports', { signal, max: 500 }), [client]);
  // The glossary is one page without limit/cursor, like GET /v1/models.
  const labels = useLoad(async (signal) => (await client.get<Page<Label>>('/v1/labels', { signal })).items, [client]);
  const [format, setFormat] = useState<ExportFormat>('csv');
  const [deidentify, setDeidentify] = useState(true);
  const [filters, setFilters] = useState({ patient_id: '', modality: '', label: '', min_confidence: '' });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const confidenceProblem = minConfidenceProblem(filters.min_confidence);

  const create = async (event: FormEvent) => {
    event.preventDefault();
    // The message is already on screen; nothing is sent until it is fixed.
    if (confidenceProblem) return;
    setBusy(true);
    setError(null);
    const chosen: ExportFilters = {};
    if (filters.patient_id) chosen.patient_id = filters.patient_id;
    if (filters.modality) chosen.modality = filters.modality;
    if (filters.label) chosen.label = filters.label;
    if (filters.min_confidence.trim()) chosen.min_confidence = Number(filters.min_confidence);
    try {
      await client.post<ExportRecord>('/v1/exports', { body: { format, deidentify, filters: chosen } });
      list.reload();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };

  const download = async (record: ExportRecord) => {
    setError(null);
    try {
      const { blob } = await client.binary(record.download_url);
      saveBlob(blob, `mia-export-${record.id}.${record.format}`);
    } catch (caught) {
      setError(caught);
    }
  };

  const field = (name: keyof typeof filters, label: string, placeholder: string, extra: { invalid?: boolean; inputMode?: 'decimal' } = {}) => (
    <label>
      {label}
      <input
        value={filters[name]}
        placeholder={placeholder}
        onChange={(e) => setFilters((f) => ({ ...f, [name]: e.target.value }))}
        aria-invalid={extra.invalid ?? false}
        inputMode={extra.inputMode}
        data-testid={`export-${name.replace('_', '-')}`}
      />
    </label>
  );
  const labelOptions = labels.state === 'ready' ? labels.value : [];

  return (
    <section data-testid="exports">
      {hasScope(me, 'write:exports') ? (
        <form className="panel" onSubmit={(e) => void create(e)}>
          <h2>New export</h2>
          <div className="form-row">
            <label>
              Format
              <select value={format} onChange={(e) => setFormat(EXPORT_FORMATS.find((f) => f === e.target.value) ?? 'csv')}>
                {EXPORT_FORMATS.map((f) => (
                  <option key={f}>{f}</option>
                ))}
              </select>
            </label>
            {field('patient_id', 'Patient', 'any')}
            {field('modality', 'Modality', 'MR, CT…')}
            <label>
              Label
              <select
                value={filters.label}
                onChange={(e) => setFilters((f) => ({ ...f, label: e.target.value }))}
                data-testid="export-label"
                title={labels.state === 'error' ? 'The label glossary could not be loaded' : undefined}
              >
                <option value="">any label</option>
                {labelOptions.map((l) => (
                  <option key={l.label} value={l.label} title={l.definition}>
                    {l.display_name}
                  </option>
                ))}
              </select>
            </label>
            {field('min_confidence', 'Min confidence (0–1)', '0.5', { invalid: confidenceProblem !== null, inputMode: 'decimal' })}
            <label className="check">
              <input type="checkbox" checked={deidentify} onChange={(e) => setDeidentify(e.target.checked)} /> De-identify (pseudonymous ids and UIDs)
            </label>
            <button type="submit" className="primary" disabled={busy} data-testid="create-export">
              Create export
            </button>
          </div>
          {confidenceProblem ? (
            <p className="inline-error" role="alert" data-testid="export-form-problem">
              {confidenceProblem}
            </p>
          ) : null}
          {labels.state === 'error' ? <p className="muted">The label list could not be loaded; exports can still be made for any label.</p> : null}
        </form>
      ) : null}
      <InlineError error={error} />
      <div className="panel">
        <h2>Exports</h2>
        {list.state === 'loading' ? <Loading what="exports" /> : null}
        {list.state === 'error' ? <ErrorState error={list.error} retry={list.reload} /> : null}
        {list.state === 'ready' && list.value.length === 0 ? <Empty title="No exports yet">Create one above; it appears here ready to download.</Empty> : null}
        {list.state === 'ready' && list.value.length > 0 ? (
          <table className="grid">
            <thead>
              <tr>
                <th>Created</th>
                <th>Format</th>
                <th>De-identified</th>
                <th>Filters</th>
                <th>Rows</th>
                <th>Size</th>
                <th>Status</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.value
                .slice()
                .reverse()
                .map((record) => (
                  <tr key={record.id}>
                    <td>{dateTime(record.created_at)}</td>
                    <td>{record.format}</td>
                    <td>{record.deidentified ? 'yes' : 'no'}</td>
                    <td className="mono">{JSON.stringify(record.filters)}</td>
                    <td className="num">{record.row_count}</td>
                    <td>{bytes(record.size_bytes)}</td>
                    <td>{record.status}</td>
                    <td>
                      <button type="button" onClick={() => void download(record)} disabled={record.status !== 'ready'}>
                        Download
                      </button>
                    </td>
                  </tr>
                ))}
            </tbody>
          </table>
        ) : null}
      </div>
    </section>
  );
}
