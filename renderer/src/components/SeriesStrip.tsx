/**
 * The patient's series as thumbnails under the viewer, grouped by study: this study first, then
 * the patient's other studies, newest first. A click puts the series in the active pane (pane 1
 * opens it as the viewer's scan); a thumbnail can also be dragged onto any pane. The list is the
 * worklist's own endpoint (GET /v1/scans?patient_id=), so it shows what the key may see.
 */
import type { Scan } from '../api/types.ts';
import { dicomDate, dicomDateKey } from '../dicom-date.ts';
import { isPrior } from '../imaging/layout.ts';
import { navigate } from '../route.ts';
import { useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import { Thumbnail } from './Thumbnail.tsx';

/** Enough for a patient's series on a reading workstation; the worklist pages beyond it. */
const MAX_SERIES = 200;

/** The drag payload of a thumbnail: a scan id, under a type of our own so text drops are ignored. */
export const SERIES_DRAG_TYPE = 'application/x-mia-scan';

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

/** The patient's series, or null while loading (or when the list cannot be had: the strip is then left out). */
export function usePatientSeries(patientId: string): readonly Scan[] | null {
  const { client } = useSession();
  const loaded = useLoad(
    (signal) => client.all<Scan>(`/v1/scans?patient_id=${encodeURIComponent(patientId)}&limit=100`, { signal, max: MAX_SERIES }),
    [client, patientId],
  );
  return loaded.state === 'ready' ? loaded.value : null;
}

type Props = {
  scan: Scan;
  scans: readonly Scan[] | null;
  /** Pane number (1-4) showing each scan id, for the thumbnails' badges. */
  shownIn?: ReadonlyMap<string, number>;
  /** Where a click sends the series; without it, the viewer opens it. */
  onPick?: (scan: Scan) => void;
};

export function SeriesStrip({ scan, scans, shownIn, onPick }: Props) {
  if (!scans || scans.length < 2) return null;
  const ordered = seriesOrder(scan, scans);
  const groups: { studyUid: string; items: Scan[] }[] = [];
  for (const s of ordered) {
    const last = groups[groups.length - 1];
    if (last?.studyUid === s.study_uid) last.items.push(s);
    else groups.push({ studyUid: s.study_uid, items: [s] });
  }
  return (
    <div className="series-strip" data-testid="series-strip" aria-label="Series of this patient">
      {groups.map((group) => {
        const first = group.items[0]!;
        const current = group.studyUid === scan.study_uid;
        const prior = isPrior(scan, first);
        return (
          <div key={group.studyUid} className={`series-study${current ? ' current-study' : ''}`} data-testid="series-study" data-study-uid={group.studyUid}>
            <div className="series-study-head" title={first.study_description ?? ''}>
              {current ? 'This study' : prior ? 'Prior' : 'Other study'} · {dicomDate(first.study_date)}
            </div>
            <div className="series-study-items">
              {group.items.map((s) => {
                const pane = shownIn?.get(s.scan_id);
                return (
                  <button
                    key={s.scan_id}
                    type="button"
                    className={`series-item${s.scan_id === scan.scan_id ? ' current' : ''}${s.study_uid !== scan.study_uid ? ' other-study' : ''}`}
                    onClick={() => (onPick ? onPick(s) : navigate({ name: 'viewer', scanId: s.scan_id }))}
                    draggable
                    onDragStart={(event) => {
                      event.dataTransfer.setData(SERIES_DRAG_TYPE, s.scan_id);
                      event.dataTransfer.effectAllowed = 'copy';
                    }}
                    title={`${s.modality} · series ${s.series_number ?? '—'} · ${s.description ?? s.study_description ?? ''} · ${dicomDate(s.study_date)} (click: active pane; or drag onto a pane)`}
                    data-testid="series-item"
                    data-scan-id={s.scan_id}
                    data-pane={pane ?? ''}
                    aria-current={s.scan_id === scan.scan_id ? 'true' : undefined}
                  >
                    <Thumbnail scanId={s.scan_id} />
                    <span className="series-label">
                      {s.modality} {s.series_number ?? ''} · {s.instance_count}
                      {pane ? <span className="series-pane"> · pane {pane}</span> : null}
                    </span>
                  </button>
                );
              })}
            </div>
          </div>
        );
      })}
    </div>
  );
}
