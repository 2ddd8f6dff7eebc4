/**
 * The patient's series as thumbnails under the viewer: this study's series first, then the
 * patient's other studies, newest first; a click opens that series in the viewer. The list is
 * the worklist's own endpoint (GET /v1/scans?patient_id=), so it shows what the key may see.
 */
import type { Scan } from '../api/types.ts';
import { dicomDate, dicomDateKey } from '../dicom-date.ts';
import { navigate } from '../route.ts';
import { useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import { Thumbnail } from './Thumbnail.tsx';

/** Enough for a patient's series on a reading workstation; the worklist pages beyond it. */
const MAX_SERIES = 200;

/** This study first, then other studies by date (newest first), series by number within a study. */
export function seriesOrder(current: Pick<Scan, 'study_uid'>, scans: readonly Scan[]): Scan[] {
  const rank = (s: Scan) => (s.study_uid === current.study_uid ? 0 : 1);
  return [...scans].sort(
    (a, b) =>
      rank(a) - rank(b) ||
      dicomDateKey(b.study_date).localeCompare(dicomDateKey(a.study_date)) ||
      a.study_uid.localeCompare(b.study_uid) ||
      (a.series_number ?? Infinity) - (b.series_number ?? Infinity) ||
      a.scan_id.localeCompare(b.scan_id),
  );
}

export function SeriesStrip({ scan }: { scan: Scan }) {
  const { client } = useSession();
  const loaded = useLoad(
    (signal) => client.all<Scan>(`/v1/scans?patient_id=${encodeURIComponent(scan.patient_id)}&limit=100`, { signal, max: MAX_SERIES }),
    [client, scan.patient_id],
  );
  if (loaded.state !== 'ready' || loaded.value.length < 2) return null;
  return (
    <div className="series-strip" data-testid="series-strip" aria-label="Series of this patient">
      {seriesOrder(scan, loaded.value).map((s) => (
        <button
          key={s.scan_id}
          type="button"
          className={`series-item${s.scan_id === scan.scan_id ? ' current' : ''}${s.study_uid !== scan.study_uid ? ' other-study' : ''}`}
          onClick={() => navigate({ name: 'viewer', scanId: s.scan_id })}
          title={`${s.modality} · series ${s.series_number ?? '—'} · ${s.description ?? s.study_description ?? ''} · ${dicomDate(s.study_date)}`}
          data-testid="series-item"
          data-scan-id={s.scan_id}
          aria-current={s.scan_id === scan.scan_id ? 'true' : undefined}
        >
          <Thumbnail scanId={s.scan_id} />
          <span className="series-label">
            {s.modality} {s.series_number ?? ''} · {s.instance_count}
            {s.study_uid !== scan.study_uid ? <><br />{dicomDate(s.study_date)}</> : null}
          </span>
        </button>
      ))}
    </div>
  );
}
