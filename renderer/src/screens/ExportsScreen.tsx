/** Exports for data engineers: create with filters, format and de-identification; list; download. */
import { useState, type FormEvent } from 'react';
import { EXPORT_FORMATS, type ExportFormat } from '../../../common/vocabulary.ts';
import type { ExportFilters, ExportRecord } from '../api/types.ts';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { bytes, dateTime, saveBlob } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';

export function ExportsScreen() {
  const { client, me } = useSession();
  const list = useLoad((signal) => client.all<ExportRecord>('/v1/exports', { signal, max: 500 }), [client]);
  const [format, setFormat] = useState<ExportFormat>('csv');
  const [deidentify, setDeidentify] = useState(true);
  const [filters, setFilters] = useState({ patient_id: '', modality: '', label: '', min_confidence: '' });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const create = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const chosen: ExportFilters = {};
    if (filters.patient_id) chosen.patient_id = filters.patient_id;
    if (filters.modality) chosen.modality = filters.modality;
    if (filters.label) chosen.label = filters.label;
    if (filters.min_confidence) chosen.min_confidence = Number(filters.min_confidence);
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

  const field = (name: keyof typeof filters, label: string, placeholder: string) => (
    <label>
      {label}
      <input value={filters[name]} placeholder={placeholder} onChange={(e) => setFilters((f) => ({ ...f, [name]: e.target.value }))} />
    </label>
  );

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
            {field('label', 'Label', 'tumor_detected')}
            {field('min_confidence', 'Min confidence', '0.5')}
            <label className="check">
              <input type="checkbox" checked={deidentify} onChange={(e) => setDeidentify(e.target.checked)} /> De-identify (pseudonymous ids and UIDs)
            </label>
            <button type="submit" className="primary" disabled={busy}>
              Create export
            </button>
          </div>
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
