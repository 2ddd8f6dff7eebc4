/**
 * Search PACS: pick one of the install's DICOM peers, search it at patient, study or series level
 * (C-FIND or QIDO-RS on the server), and retrieve a study, a series or a patient's priors into
 * this archive; the recent retrieves below show their progress until they end, and retrieved
 * studies appear on the worklist. Every control is a native form element or button (Tab, Enter);
 * the patient name field has focus when the screen opens.
 */
import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import type { Page } from '../api/types.ts';
import type { DicomSource, PatientMatch, QueryFilters, QueryLevel, QueryResult, Retrieve, RetrieveRequest, SeriesMatch, StudyMatch } from '../api/pacs-types.ts';
import { PatientName } from '../components/PatientName.tsx';
import { Empty, ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dicomDate, errorText } from '../format.ts';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import '../pacs.css';

const RESULT_LIMIT = 100;
const RECENT = 20;

type Fields = { patientName: string; patientId: string; from: string; to: string; modality: string; accession: string; studyUid: string };
const NO_FIELDS: Fields = { patientName: '', patientId: '', from: '', to: '', modality: '', accession: '', studyUid: '' };

function filtersOf(level: QueryLevel, f: Fields): QueryFilters {
  const out: QueryFilters = {};
  const set = (key: keyof QueryFilters, value: string) => {
    if (value.trim()) out[key] = value.trim();
  };
  set('patient_name', f.patientName);
  set('patient_id', f.patientId);
  // A patient search matches name and ID only (the server refuses the others there).
  if (level !== 'patient') {
    set('study_date_from', f.from);
    set('study_date_to', f.to);
    set('modality', f.modality.toUpperCase());
    set('accession', f.accession);
    set('study_uid', f.studyUid);
  }
  return out;
}

/** YYYYMMDD as YYYY-MM-DD (what `before` takes), or undefined. */
function isoDay(da: string): string | undefined {
  return /^\d{8}$/.test(da) ? `${da.slice(0, 4)}-${da.slice(4, 6)}-${da.slice(6, 8)}` : undefined;
}

const STATUS_TEXT: Record<Retrieve['status'], string> = {
  running: 'Retrieving',
  completed: 'Retrieved',
  partial: 'Partly retrieved',
  failed: 'Failed',
  interrupted: 'Interrupted',
};

function targetText(r: Retrieve): string {
  const t = r.target;
  if (t.kind === 'priors') {
    const bounds = [t.before ? `before ${t.before}` : '', t.modalities ? t.modalities.join('/') : ''].filter(Boolean).join(', ');
    return `Priors of ${t.patient_id ?? '?'}${bounds ? ` (${bounds})` : ''}`;
  }
  return `${t.kind === 'series' ? 'Series' : 'Study'} of ${t.patient_id ?? 'unknown patient'}`;
}

function expectedOf(r: Retrieve): number | null {
  if (r.studies.some((s) => s.expected_instances === null)) return null;
  return r.studies.reduce((n, s) => n + (s.expected_instances ?? 0), 0);
}

function RetrieveRow({ retrieve }: { retrieve: Retrieve }) {
  const expected = expectedOf(retrieve);
  const arrived = retrieve.counts.completed + retrieve.counts.warning;
  const share = expected ? Math.min(100, Math.round(((arrived + retrieve.counts.failed) / expected) * 100)) : retrieve.status === 'running' ? 0 : 100;
  return (
    <tr data-testid="retrieve-row" data-status={retrieve.status} data-retrieve-id={retrieve.id}>
      <td className="nowrap">{new Date(retrieve.created_at).toLocaleString()}</td>
      <td>{retrieve.source.name}</td>
      <td>
        {targetText(retrieve)}
        {retrieve.studies.length > 0 ? (
          <ul className="retrieve-studies">
            {retrieve.studies.map((s) => (
              <li key={`${s.study_uid}-${s.series_uid ?? ''}`} data-testid="retrieve-study" data-status={s.status}>
                {dicomDate(s.study_date)} {s.modalities.join('/')} {s.description || ''}: <b>{s.status}</b> {s.completed}
                {s.expected_instances !== null ? ` of ${s.expected_instances}` : ''} images
                {s.failed > 0 ? `, ${s.failed} failed` : ''}
                {s.warning > 0 ? `, ${s.warning} already here` : ''}
              </li>
            ))}
          </ul>
        ) : null}
      </td>
      <td className="nowrap">
        <span className={`retrieve-status retrieve-${retrieve.status}`} data-testid="retrieve-status">
          {retrieve.status === 'running' ? '⟳ ' : ''}
          {STATUS_TEXT[retrieve.status]}
        </span>
        <div className="progress" title={`${arrived} of ${expected ?? '?'} images`}>
          <div style={{ width: `${share}%` }} />
        </div>
      </td>
      <td className="retrieve-error" data-testid="retrieve-error">
        {retrieve.error ?? (retrieve.status === 'completed' ? <a href="#/worklist">Open the worklist</a> : '')}
      </td>
    </tr>
  );
}

export function SearchPacsScreen() {
  const { client, me } = useSession();
  const canRetrieve = hasScope(me, 'write:scans');
  const sources = useLoad(async (signal) => (await client.get<Page<DicomSource>>('/v1/dicom/sources', { signal })).items, [client]);
  const [sourceId, setSourceId] = useState('');
  const [level, setLevel] = useState<QueryLevel>('study');
  const [fields, setFields] = useState<Fields>(NO_FIELDS);
  const [result, setResult] = useState<QueryResult | null>(null);
  const [searching, setSearching] = useState(false);
  const [searchError, setSearchError] = useState<unknown>(null);
  const [retrieveError, setRetrieveError] = useState<unknown>(null);
  const [asked, setAsked] = useState<ReadonlySet<string>>(() => new Set());
  const nameRef = useRef<HTMLInputElement>(null);
  const retrieves = useLoad(async (signal) => (await client.get<Page<Retrieve>>(`/v1/dicom/retrieves?limit=${RECENT}`, { signal })).items, [client]);

  const list = sources.state === 'ready' ? sources.value : [];
  const source = list.find((s) => s.id === sourceId) ?? list[0] ?? null;
  // Once the sources are here the form is on screen: the name field takes the keys.
  useEffect(() => nameRef.current?.focus(), [sources.state]);

  // Live progress: while a retrieve runs, the list is read again every 2 s.
  const running = retrieves.state === 'ready' && retrieves.value.some((r) => r.status === 'running');
  const { reload } = retrieves;
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(reload, 2000);
    return () => clearInterval(timer);
  }, [running, reload]);

  const search = useCallback(
    async (searchLevel: QueryLevel, searchFields: Fields) => {
      if (!source) return;
      setSearching(true);
      setSearchError(null);
      try {
        const found = await client.post<QueryResult>('/v1/dicom/query', { body: { peer: source.id, level: searchLevel, filters: filtersOf(searchLevel, searchFields), limit: RESULT_LIMIT } });
        setResult(found);
      } catch (caught) {
        setResult(null);
        setSearchError(caught);
      } finally {
        setSearching(false);
      }
    },
    [client, source],
  );

  const submit = (event: FormEvent) => {
    event.preventDefault();
    void search(level, fields);
  };

  const drill = (nextLevel: QueryLevel, change: Partial<Fields>) => {
    const next = { ...fields, ...change };
    setLevel(nextLevel);
    setFields(next);
    void search(nextLevel, next);
  };

  const retrieve = async (key: string, request: Omit<RetrieveRequest, 'peer'>) => {
    if (!source) return;
    setRetrieveError(null);
    setAsked((current) => new Set(current).add(key));
    try {
      await client.post<Retrieve>('/v1/dicom/retrieve', { body: { peer: source.id, ...request } });
      reload();
    } catch (caught) {
      setRetrieveError(caught);
      setAsked((current) => {
        const next = new Set(current);
        next.delete(key);
        return next;
      });
    }
  };

  const set = (key: keyof Fields) => (event: { target: { value: string } }) => setFields((f) => ({ ...f, [key]: event.target.value }));
  const items = result?.items ?? [];
  const studies = useMemo(() => items.filter((i): i is StudyMatch => i.level === 'study'), [items]);
  const patients = useMemo(() => items.filter((i): i is PatientMatch => i.level === 'patient'), [items]);
  const series = useMemo(() => items.filter((i): i is SeriesMatch => i.level === 'series'), [items]);

  const retrieveButton = (key: string, label: string, title: string, request: Omit<RetrieveRequest, 'peer'>, testId: string) =>
    canRetrieve ? (
      <button type="button" onClick={() => void retrieve(key, request)} disabled={asked.has(key)} title={title} data-testid={testId}>
        {asked.has(key) ? 'Asked' : label}
      </button>
    ) : null;

  if (sources.state === 'loading') return <Loading what="DICOM sources" />;
  if (sources.state === 'error') return <ErrorState error={sources.error} retry={sources.reload} />;

  return (
    <section className="search-pacs" data-testid="search-pacs">
      <div className="panel">
        <div className="pacs-title">
          <h2>Search PACS</h2>
          <a href="#/worklist">Back to the worklist</a>
        </div>
        {list.length === 0 ? (
          <Empty title="No PACS or DICOMweb server is set up">An admin adds them on the Admin screen (DICOM peers) or with mia dicom peers add.</Empty>
        ) : (
          <form className="form-row" onSubmit={submit} aria-label="Search a PACS">
            <label>
              Source
              <select value={source?.id ?? ''} onChange={(e) => setSourceId(e.target.value)} data-testid="pacs-source">
                {list.map((s) => (
                  <option key={s.id} value={s.id}>
                    {s.name} ({s.kind === 'dimse' ? 'DICOM' : 'DICOMweb'})
                  </option>
                ))}
              </select>
            </label>
            <label>
              Level
              <select value={level} onChange={(e) => setLevel(e.target.value as QueryLevel)} data-testid="pacs-level">
                <option value="patient">Patients</option>
                <option value="study">Studies</option>
                <option value="series">Series of a study</option>
              </select>
            </label>
            <label>
              Patient name
              <input ref={nameRef} value={fields.patientName} onChange={set('patientName')} placeholder="DOE* (wildcards * ?)" size={18} data-testid="pacs-patient-name" />
            </label>
            <label>
              Patient ID
              <input value={fields.patientId} onChange={set('patientId')} size={12} data-testid="pacs-patient-id" />
            </label>
            {level !== 'patient' ? (
              <>
                <label>
                  Study date from
                  <input type="date" value={fields.from} onChange={set('from')} data-testid="pacs-date-from" />
                </label>
                <label>
                  to
                  <input type="date" value={fields.to} onChange={set('to')} data-testid="pacs-date-to" />
                </label>
                <label>
                  Modality
                  <input value={fields.modality} onChange={set('modality')} placeholder="CT" size={4} data-testid="pacs-modality" />
                </label>
                <label>
                  Accession
                  <input value={fields.accession} onChange={set('accession')} size={10} data-testid="pacs-accession" />
                </label>
              </>
            ) : null}
            {level === 'series' ? (
              <label>
                Study UID
                <input value={fields.studyUid} onChange={set('studyUid')} size={30} required data-testid="pacs-study-uid" />
              </label>
            ) : null}
            <button type="submit" className="primary" disabled={searching || !source} data-testid="pacs-search">
              {searching ? 'Searching…' : 'Search'}
            </button>
          </form>
        )}
        {!canRetrieve ? <p className="muted">Retrieving into this archive needs the write:scans scope; ask an admin to grant it.</p> : null}
      </div>

      {searchError ? (
        <p className="inline-error" role="alert" data-testid="pacs-error">
          {errorText(searchError)}
        </p>
      ) : null}
      {retrieveError ? (
        <p className="inline-error" role="alert" data-testid="pacs-retrieve-error">
          {errorText(retrieveError)}
        </p>
      ) : null}

      {result ? (
        <div className="panel" data-testid="pacs-results">
          <h3>
            {items.length} {result.level === 'patient' ? 'patient(s)' : result.level === 'study' ? 'stud(ies)' : 'series'} on {result.source.name}
          </h3>
          {result.capped ? (
            <p className="warn-text" data-testid="pacs-capped">
              More matched than the first {result.limit}: narrow the filters.
            </p>
          ) : null}
          {items.length === 0 ? <Empty title="Nothing matched">Loosen a filter; * and ? are wildcards in names and IDs.</Empty> : null}
          {patients.length > 0 ? (
            <table className="grid">
              <thead>
                <tr>
                  <th>Patient</th>
                  <th>Patient ID</th>
                  <th>Birth date</th>
                  <th>Sex</th>
                  <th>Studies</th>
                  <th aria-label="Actions" />
                </tr>
              </thead>
              <tbody>
                {patients.map((p) => (
                  <tr key={p.patient_id} data-testid="pacs-patient-row">
                    <td>
                      <PatientName value={p.patient_name} />
                    </td>
                    <td>{p.patient_id}</td>
                    <td className="nowrap">{dicomDate(p.birth_date)}</td>
                    <td>{p.sex || '—'}</td>
                    <td className="num">{p.studies ?? '—'}</td>
                    <td className="actions nowrap">
                      <button type="button" onClick={() => drill('study', { ...NO_FIELDS, patientId: p.patient_id })} data-testid="show-studies">
                        Studies
                      </button>{' '}
                      {retrieveButton(`priors:${p.patient_id}`, 'Retrieve priors', "Every study of this patient on the PACS", { priors_of_patient_id: p.patient_id }, 'retrieve-priors')}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          {studies.length > 0 ? (
            <table className="grid">
              <thead>
                <tr>
                  <th>Patient</th>
                  <th>Patient ID</th>
                  <th>Study date</th>
                  <th>Modalities</th>
                  <th>Description</th>
                  <th>Accession</th>
                  <th>Series</th>
                  <th>Images</th>
                  <th aria-label="Actions" />
                </tr>
              </thead>
              <tbody>
                {studies.map((s) => (
                  <tr key={s.study_uid} data-testid="pacs-study-row" data-study-uid={s.study_uid}>
                    <td>
                      <PatientName value={s.patient_name} />
                    </td>
                    <td>{s.patient_id}</td>
                    <td className="nowrap" data-testid="pacs-study-date">
                      {dicomDate(s.study_date)}
                    </td>
                    <td>{s.modalities.join(', ') || '—'}</td>
                    <td>{s.description || '—'}</td>
                    <td>{s.accession_number || '—'}</td>
                    <td className="num">{s.series_count ?? '—'}</td>
                    <td className="num">{s.instance_count ?? '—'}</td>
                    <td className="actions nowrap">
                      {s.in_archive ? (
                        <span className="muted" data-testid="in-archive" title="This archive already holds (part of) this study">
                          In archive{' '}
                        </span>
                      ) : null}
                      <button type="button" onClick={() => drill('series', { studyUid: s.study_uid })} data-testid="show-series">
                        Series
                      </button>{' '}
                      {retrieveButton(`study:${s.study_uid}`, 'Retrieve', 'Retrieve this study into the archive', { study_uid: s.study_uid }, 'retrieve-study')}{' '}
                      {retrieveButton(
                        `priors:${s.patient_id}:${s.study_date}`,
                        'Retrieve priors',
                        `The patient's studies before ${dicomDate(s.study_date)}`,
                        { priors_of_patient_id: s.patient_id, ...(isoDay(s.study_date) ? { before: isoDay(s.study_date) } : {}) },
                        'retrieve-priors',
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          {series.length > 0 ? (
            <table className="grid">
              <thead>
                <tr>
                  <th>#</th>
                  <th>Modality</th>
                  <th>Description</th>
                  <th>Images</th>
                  <th aria-label="Actions" />
                </tr>
              </thead>
              <tbody>
                {series.map((s) => (
                  <tr key={s.series_uid} data-testid="pacs-series-row">
                    <td className="num">{s.series_number ?? '—'}</td>
                    <td>{s.modality}</td>
                    <td>{s.description || '—'}</td>
                    <td className="num">{s.instance_count ?? '—'}</td>
                    <td className="actions">
                      {retrieveButton(`series:${s.series_uid}`, 'Retrieve', 'Retrieve this series into the archive', { study_uid: s.study_uid, series_uid: s.series_uid }, 'retrieve-series')}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
        </div>
      ) : null}

      <div className="panel" data-testid="pacs-retrieves">
        <h3>Recent retrieves</h3>
        {retrieves.state === 'error' ? <InlineError error={retrieves.error} /> : null}
        {retrieves.state === 'ready' && retrieves.value.length === 0 ? <p className="muted">None yet. Retrieved studies appear on the worklist.</p> : null}
        {retrieves.state === 'ready' && retrieves.value.length > 0 ? (
          <table className="grid">
            <thead>
              <tr>
                <th>Asked</th>
                <th>Source</th>
                <th>What</th>
                <th>Status</th>
                <th>Problem</th>
              </tr>
            </thead>
            <tbody>
              {retrieves.value.map((r) => (
                <RetrieveRow key={r.id} retrieve={r} />
              ))}
            </tbody>
          </table>
        ) : null}
      </div>
    </section>
  );
}
