/**
 * A finding the model missed (issue 11, reading tools): the reader draws a box on the current
 * frame and picks a label from the glossary (GET /v1/labels); the server keeps it as an accepted
 * reader finding of the scan's analysis (POST /v1/scans/{scan_id}/findings), so it enters the
 * report and the exports. Like the measurement layer, an SVG over the canvas that takes the
 * pointer only while the tool is on.
 */
import { useEffect, useState, type PointerEvent as ReactPointerEvent } from 'react';
import type { Client } from '../api/client.ts';
import type { Finding, Label, Page, Report, ScanResult } from '../api/types.ts';
import { imagePointMapping, type Orient } from '../imaging/display-tools.ts';
import type { Slice } from '../imaging/stack.ts';
import type { Transform } from '../imaging/viewport.ts';

type Point = [number, number];
const COLOUR = '#79c0ff';

type Props = {
  client: Client;
  scanId: string;
  slice: Slice | null;
  transform: Transform;
  orient: Orient;
  size: { width: number; height: number };
  /** The scan's report is final: the finding is added by a signed addendum to it (new_findings). */
  locked: boolean;
  onAdded(finding: Finding): void;
};

export function FindingDrawLayer({ client, scanId, slice, transform, orient, size, locked, onAdded }: Props) {
  const [on, setOn] = useState(false);
  const [drag, setDrag] = useState<[Point, Point] | null>(null);
  const [box, setBox] = useState<[Point, Point] | null>(null);
  const [labels, setLabels] = useState<Label[]>([]);
  const [label, setLabel] = useState('');
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (!on || labels.length > 0) return;
    client
      .get<Page<Label>>('/v1/labels')
      .then((page) => {
        setLabels(page.items);
        setLabel((current) => current || (page.items[0]?.label ?? ''));
      })
      .catch((e: unknown) => setError(`Labels not loaded: ${e instanceof Error ? e.message : String(e)}`));
  }, [on, labels.length, client]);

  const { toImage, toScreen } = imagePointMapping(orient, size, transform);
  const pointer = (event: ReactPointerEvent<SVGSVGElement>): Point => {
    const r = event.currentTarget.getBoundingClientRect();
    return toImage(event.clientX - r.left, event.clientY - r.top);
  };

  const shown = drag ?? box;
  const rect = shown
    ? (() => {
        const [a, b] = shown.map(toScreen) as [{ x: number; y: number }, { x: number; y: number }];
        return { x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), width: Math.abs(b.x - a.x), height: Math.abs(b.y - a.y) };
      })()
    : null;

  const add = async () => {
    if (!box || !slice) return;
    const columns = slice.instance.columns;
    const rows = slice.instance.rows;
    // The box in image pixels, kept inside the image (the server refuses one that leaves it).
    const x0 = Math.max(0, Math.min(box[0][0], box[1][0]));
    const y0 = Math.max(0, Math.min(box[0][1], box[1][1]));
    const x1 = Math.min(columns, Math.max(box[0][0], box[1][0]));
    const y1 = Math.min(rows, Math.max(box[0][1], box[1][1]));
    const drawn = { label, instance_uid: slice.instance.instance_uid, frame: slice.frame, location: { x: x0, y: y0, width: x1 - x0, height: y1 - y0 } };
    try {
      const finding = locked ? await addByAddendum(drawn) : await client.post<Finding>(`/v1/scans/${encodeURIComponent(scanId)}/findings`, { body: { source: 'reader', ...drawn } });
      onAdded(finding);
      setBox(null);
      setOn(false);
      setError(null);
    } catch (e) {
      setError(`Finding not added: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // A final report locks its findings: the new one goes in a signed addendum, which says so.
  const addByAddendum = async (drawn: { label: string }): Promise<Finding> => {
    const finals = await client.get<Page<Report>>(`/v1/reports?scan_id=${encodeURIComponent(scanId)}&status=final`);
    const report = finals.items[0];
    if (!report) throw new Error('this scan has no final report to add an addendum to');
    const name = labels.find((l) => l.label === drawn.label)?.display_name ?? drawn.label;
    const updated = await client.post<Report>(`/v1/reports/${encodeURIComponent(report.id)}/addenda`, {
      body: { text: `Finding added in the viewer after signing: ${name}.`, new_findings: [drawn] },
    });
    const id = updated.addenda.at(-1)?.finding_changes.find((c) => c.added)?.finding_id;
    const result = await client.get<ScanResult>(`/v1/scans/${encodeURIComponent(scanId)}/results`);
    const finding = result.findings.find((f) => f.id === id);
    if (!finding) throw new Error('the addendum was signed but its finding is not in the result');
    return finding;
  };

  return (
    <>
      <svg
        data-testid="draw-finding-layer"
        style={{ position: 'absolute', inset: 0, width: '100%', height: '100%', pointerEvents: on && !box ? 'all' : 'none', cursor: on ? 'crosshair' : 'default' }}
        onPointerDown={(event) => {
          if (!on || box || event.button !== 0) return;
          event.currentTarget.setPointerCapture(event.pointerId);
          const p = pointer(event);
          setDrag([p, p]);
        }}
        onPointerMove={(event) => {
          if (drag) setDrag([drag[0], pointer(event)]);
        }}
        onPointerUp={(event) => {
          if (!drag) return;
          const end = pointer(event);
          setDrag(null);
          // A click without a drag draws nothing.
          if (Math.abs(end[0] - drag[0][0]) * transform.scale < 4 || Math.abs(end[1] - drag[0][1]) * transform.scaleY < 4) return;
          setBox([drag[0], end]);
        }}
        onPointerCancel={() => setDrag(null)}
      >
        {rect ? <rect data-testid="draw-finding-box" {...rect} fill="none" stroke={COLOUR} strokeWidth={2} strokeDasharray="6 3" /> : null}
      </svg>
      {/* Below the measurement tools (top 6) and the top orientation marker (top 44, styles.css). */}
      <div style={{ position: 'absolute', top: 70, left: '50%', transform: 'translateX(-50%)', display: 'flex', gap: 4, alignItems: 'center' }}>
        <button
          type="button"
          data-testid="draw-finding"
          className={on ? 'primary' : ''}
          title={locked ? 'Add a finding the model missed, by a signed addendum to the final report' : 'Add a finding the model missed: drag a box, then pick its label'}
          onClick={() => {
            setOn((v) => !v);
            setBox(null);
            setDrag(null);
          }}
        >
          + Finding
        </button>
        {box ? (
          <>
            <select value={label} onChange={(e) => setLabel(e.target.value)} data-testid="draw-finding-label" aria-label="Label of the new finding">
              {labels.map((l) => (
                <option key={l.label} value={l.label}>
                  {l.display_name}
                </option>
              ))}
            </select>
            <button type="button" className="primary" data-testid="draw-finding-add" disabled={!label} onClick={() => void add()}>
              Add
            </button>
            <button type="button" onClick={() => setBox(null)} data-testid="draw-finding-cancel">
              Cancel
            </button>
          </>
        ) : on ? (
          <span className="overlay-text" style={{ position: 'static' }}>
            Drag a box around the lesion{locked ? ' (added by a signed addendum)' : ''}
          </span>
        ) : null}
      </div>
      {error ? (
        <div className="overlay-text bc key-note" role="alert" data-testid="draw-finding-error">
          {error}
        </div>
      ) : null}
    </>
  );
}
