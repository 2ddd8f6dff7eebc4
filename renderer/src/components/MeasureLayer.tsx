/**
 * Measurement tools over the viewer's image (issue 11, reading tools): a length, an ellipse and a
 * rectangle ROI (area in mm², mean and SD in modality units) and a pixel-value probe. Each is
 * drawn on the current frame, computed from that frame's pixel spacing and raw values while it is
 * drawn, and kept (values computed again by the server from the stored frame) for this reader (POST /v1/scans/{scan_id}/measurements), so it is shown again
 * when the reader comes back and listed in the report.
 *
 * The layer is an SVG over the canvas: while a tool is on it takes the pointer (window/level and
 * pan drags pause), otherwise events pass through to the canvas. A kept measurement is edited
 * in place with no tool on (Esc puts it down): its handles (a length's ends, an ROI's four
 * corners, the probe's point) and its outline (drag to move it whole) take the pointer; values are shown live while
 * dragging and the server computes them again on release (PATCH /v1/measurements/{id}). One a
 * final report lists stays as signed: the server's 409 is shown and the shape goes back.
 */
import { useEffect, useRef, useState, type PointerEvent as ReactPointerEvent, type SVGProps } from 'react';
import type { Client } from '../api/client.ts';
import { imagePointMapping, type Orient } from '../imaging/display-tools.ts';
import type { RawFrame } from '../imaging/frame.ts';
import { describeMeasurement, measure, valueUnit, type MeasureKind, type MeasureValues, type Point } from '../imaging/measure.ts';
import { sliceSpacing } from '../imaging/stack.ts';
import type { Slice } from '../imaging/stack.ts';
import type { Transform } from '../imaging/viewport.ts';
import type { PixelSpacingSource } from '../../../common/pixel-spacing.ts';

export type SavedMeasurement = MeasureValues & {
  id: string;
  instance_uid: string;
  frame: number;
  kind: MeasureKind;
  points: Point[];
  unit: string | null;
  pixel_spacing_source?: PixelSpacingSource | null | undefined;
};

const TOOLS: ReadonlyArray<{ kind: MeasureKind; label: string; title: string }> = [
  { kind: 'length', label: 'Length', title: 'Length in mm: drag from one end to the other' },
  { kind: 'ellipse', label: 'Ellipse', title: 'Ellipse ROI: drag a corner to the opposite corner (area, mean, SD)' },
  { kind: 'rectangle', label: 'Rect', title: 'Rectangle ROI: drag a corner to the opposite corner (area, mean, SD)' },
  { kind: 'probe', label: 'Probe', title: 'Pixel value (HU on CT): click a pixel' },
];

const COLOUR = '#7ee787';

/** A drag on a kept measurement: one handle (the opposite corner fixed for an ROI), or the whole shape. */
type Editing = { id: string; points: Point[]; grab: { handle: number } | { move: Point; from: Point[] } };

/** Where the handles of a measurement are, in image pixels: an ROI's four bounding-box corners, else its points. */
function handlesOf(m: { kind: MeasureKind; points: readonly Point[] }): Point[] {
  const [a, b] = m.points;
  if ((m.kind !== 'ellipse' && m.kind !== 'rectangle') || !a || !b) return [...m.points];
  const [x0, x1] = [Math.min(a[0], b[0]), Math.max(a[0], b[0])];
  const [y0, y1] = [Math.min(a[1], b[1]), Math.max(a[1], b[1])];
  return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
}

/** The points after moving handle `index` to `to`: an ROI keeps the opposite corner. */
function withHandle(m: { kind: MeasureKind; points: readonly Point[] }, index: number, to: Point): Point[] {
  if (m.kind === 'ellipse' || m.kind === 'rectangle') {
    const opposite = handlesOf(m)[(index + 2) % 4];
    return opposite ? [opposite, to] : [...m.points];
  }
  return m.points.map((p, i) => (i === index ? to : p));
}

type Props = {
  client: Client;
  scanId: string;
  modality: string;
  slice: Slice | null;
  frame: RawFrame | null;
  transform: Transform;
  orient: Orient;
  size: { width: number; height: number };
  canEdit: boolean;
};

export function MeasureLayer({ client, scanId, modality, slice, frame, transform, orient, size, canEdit }: Props) {
  const [saved, setSaved] = useState<SavedMeasurement[]>([]);
  const [tool, setTool] = useState<MeasureKind | null>(null);
  const [draft, setDraft] = useState<Point[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<Editing | null>(null);
  const svgRef = useRef<SVGSVGElement>(null);

  useEffect(() => {
    const controller = new AbortController();
    client
      .all<SavedMeasurement>(`/v1/scans/${encodeURIComponent(scanId)}/measurements`, { signal: controller.signal })
      .then(setSaved)
      .catch((e: unknown) => {
        if (!controller.signal.aborted) setError(`Measurements not loaded: ${e instanceof Error ? e.message : String(e)}`);
      });
    return () => controller.abort();
  }, [client, scanId]);

  // Esc while a tool is on puts the tool down instead of leaving the viewer (the viewer's own
  // Esc goes to the worklist): a capture listener on window runs before the viewer's.
  useEffect(() => {
    if (!tool) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== 'Escape') return;
      event.stopPropagation();
      event.preventDefault();
      setTool(null);
      setDraft(null);
    };
    window.addEventListener('keydown', onKey, { capture: true });
    return () => window.removeEventListener('keydown', onKey, { capture: true });
  }, [tool]);

  // While a tool is on the layer covers the canvas; the wheel still scrolls the stack: the event
  // is handed to the canvas (the viewer's wheel listener) and the page itself does not scroll.
  useEffect(() => {
    const svg = svgRef.current;
    if (!svg || !tool) return;
    const onWheel = (event: WheelEvent) => {
      event.preventDefault();
      const canvas = svg.parentElement?.querySelector('canvas');
      canvas?.dispatchEvent(
        new WheelEvent('wheel', {
          deltaX: event.deltaX,
          deltaY: event.deltaY,
          deltaMode: event.deltaMode,
          ctrlKey: event.ctrlKey,
          shiftKey: event.shiftKey,
          clientX: event.clientX,
          clientY: event.clientY,
          cancelable: true,
        }),
      );
    };
    svg.addEventListener('wheel', onWheel, { passive: false });
    return () => svg.removeEventListener('wheel', onWheel);
  }, [tool]);

  const { toImage, toScreen } = imagePointMapping(orient, size, transform);

  const pointer = (event: ReactPointerEvent<SVGSVGElement>): Point => {
    const box = event.currentTarget.getBoundingClientRect();
    return toImage(event.clientX - box.left, event.clientY - box.top);
  };

  const save = async (kind: MeasureKind, points: Point[]) => {
    if (!slice || !frame) return;
    try {
      // The server computes the values it keeps from the stored frame, by the same rules (common/measure.ts).
      const created = await client.post<SavedMeasurement>(`/v1/scans/${encodeURIComponent(scanId)}/measurements`, {
        body: { instance_uid: slice.instance.instance_uid, frame: slice.frame, kind, points },
      });
      setSaved((list) => [...list, created]);
      setError(null);
    } catch (e) {
      setError(`Measurement not saved: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  const onDown = (event: ReactPointerEvent<SVGSVGElement>) => {
    if (!tool || event.button !== 0 || !frame) return;
    const p = pointer(event);
    if (tool === 'probe') {
      void save('probe', [p]);
      return;
    }
    event.currentTarget.setPointerCapture(event.pointerId);
    setDraft([p, p]);
  };
  const onMove = (event: ReactPointerEvent<SVGSVGElement>) => {
    if (!draft?.[0]) return;
    setDraft([draft[0], pointer(event)]);
  };
  const onUp = (event: ReactPointerEvent<SVGSVGElement>) => {
    if (!tool || !draft?.[0]) return;
    const end = pointer(event);
    const start = draft[0];
    setDraft(null);
    // A click without a drag is no measurement.
    if (Math.hypot(end[0] - start[0], end[1] - start[1]) * transform.scale < 3) return;
    void save(tool, [start, end]);
  };

  /** The image point under a pointer event, whichever element of the layer it is on. */
  const imageAt = (event: ReactPointerEvent<Element>): Point | null => {
    const box = svgRef.current?.getBoundingClientRect();
    return box ? toImage(event.clientX - box.left, event.clientY - box.top) : null;
  };

  const startEdit = (event: ReactPointerEvent<SVGElement>, m: SavedMeasurement, grab: { handle: number } | 'move') => {
    if (!canEdit || event.button !== 0) return;
    const at = imageAt(event);
    if (!at) return;
    // The handle, not a new drawing or a window/level drag, takes this pointer.
    event.stopPropagation();
    event.preventDefault();
    event.currentTarget.setPointerCapture(event.pointerId);
    setEditing({ id: m.id, points: m.points, grab: grab === 'move' ? { move: at, from: m.points } : grab });
  };
  const dragEdit = (event: ReactPointerEvent<SVGElement>) => {
    if (!editing) return;
    const at = imageAt(event);
    const m = saved.find((x) => x.id === editing.id);
    if (!at || !m) return;
    event.stopPropagation();
    const grab = editing.grab;
    const points =
      'handle' in grab
        ? withHandle(m, grab.handle, at)
        : grab.from.map((p): Point => [p[0] + at[0] - grab.move[0], p[1] + at[1] - grab.move[1]]);
    setEditing({ ...editing, points });
  };
  const endEdit = (event: ReactPointerEvent<SVGElement>) => {
    if (!editing) return;
    event.stopPropagation();
    const done = editing;
    setEditing(null);
    const before = saved.find((x) => x.id === done.id);
    if (!before || done.points.every((p, i) => p[0] === before.points[i]?.[0] && p[1] === before.points[i]?.[1])) return;
    void commitEdit(before, done.points);
  };

  /** Shown moved at once; the server's values replace the live ones, or a refusal puts it back. */
  const commitEdit = async (before: SavedMeasurement, points: Point[]) => {
    const local = frame && slice ? measure(frame, before.kind, points, sliceSpacing(slice)) : {};
    setSaved((list) => list.map((x) => (x.id === before.id ? { ...x, ...local, points } : x)));
    try {
      const updated = await client.patch<SavedMeasurement>(`/v1/measurements/${encodeURIComponent(before.id)}`, { body: { points } });
      setSaved((list) => list.map((x) => (x.id === before.id ? updated : x)));
      setError(null);
    } catch (e) {
      setSaved((list) => list.map((x) => (x.id === before.id ? before : x)));
      setError(`Measurement not changed: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  const remove = async (m: SavedMeasurement) => {
    try {
      await client.del(`/v1/measurements/${encodeURIComponent(m.id)}`);
      setSaved((list) => list.filter((x) => x.id !== m.id));
    } catch (e) {
      setError(`Measurement not deleted: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  const onSlice = (slice ? saved.filter((m) => m.instance_uid === slice.instance.instance_uid && m.frame === slice.frame) : []).map(
    (m): SavedMeasurement => (editing?.id === m.id && frame && slice ? { ...m, points: editing.points, ...measure(frame, m.kind, editing.points, sliceSpacing(slice)) } : m),
  );
  const live: SavedMeasurement | null =
    draft && tool && frame && slice
      ? {
          id: 'draft',
          instance_uid: '',
          frame: 0,
          kind: tool,
          points: draft,
          unit: valueUnit(modality),
          pixel_spacing_source: slice.instance.pixel_spacing_source,
          ...measure(frame, tool, draft, sliceSpacing(slice)),
        }
      : null;

  /** The outline; `hit`: a wide invisible stroke that takes the pointer (drag to move the shape). */
  const shape = (m: SavedMeasurement, hit = false) => {
    const [a, b] = m.points.map(toScreen);
    const line = (hit
      ? { stroke: 'transparent', strokeWidth: 10, style: { pointerEvents: 'stroke', cursor: 'move' } }
      : { stroke: COLOUR, strokeWidth: 1.5 }) satisfies SVGProps<SVGElement>;
    if (!a) return null;
    if (m.kind === 'probe') return hit ? null : <circle cx={a.x} cy={a.y} r={3} fill="none" {...line} />;
    if (!b) return null;
    if (m.kind === 'length') return <line x1={a.x} y1={a.y} x2={b.x} y2={b.y} {...line} />;
    const x = Math.min(a.x, b.x);
    const y = Math.min(a.y, b.y);
    const w = Math.abs(b.x - a.x);
    const h = Math.abs(b.y - a.y);
    return m.kind === 'rectangle' ? (
      <rect x={x} y={y} width={w} height={h} fill="none" {...line} />
    ) : (
      <ellipse cx={x + w / 2} cy={y + h / 2} rx={w / 2} ry={h / 2} fill="none" {...line} />
    );
  };
  const editHandlers = (m: SavedMeasurement, grab: { handle: number } | 'move') => ({
    onPointerDown: (event: ReactPointerEvent<SVGElement>) => startEdit(event, m, grab),
    onPointerMove: dragEdit,
    onPointerUp: endEdit,
    onPointerCancel: () => setEditing(null),
  });
  // Beside the shape's right side, or its left when that would run off the viewport (labels are
  // up to ~320 px wide), and never above the top edge.
  const labelAt = (m: SavedMeasurement): { x: number; y: number; before: boolean } => {
    const screen = m.points.map(toScreen);
    const right = Math.max(...screen.map((p) => p.x));
    const left = Math.min(...screen.map((p) => p.x));
    const y = Math.max(0, Math.min(...screen.map((p) => p.y)));
    return right + 330 > size.width && left > 330 ? { x: left - 6, y, before: true } : { x: right + 6, y, before: false };
  };

  return (
    <>
      <svg
        ref={svgRef}
        data-testid="measure-layer"
        data-tool={tool ?? ''}
        style={{ position: 'absolute', inset: 0, width: '100%', height: '100%', pointerEvents: tool ? 'all' : 'none', cursor: tool ? 'crosshair' : 'default' }}
        onPointerDown={onDown}
        onPointerMove={onMove}
        onPointerUp={onUp}
        onPointerCancel={() => setDraft(null)}
      >
        {onSlice.map((m) => (
          <g key={m.id} data-testid="measure-shape" data-kind={m.kind} data-id={m.id}>
            {shape(m)}
            {/* With a tool on, a press anywhere draws (a probe on a line, a length from another's end): edit with the tool down. */}
            {canEdit && !tool ? (
              <>
                <g data-testid="measure-body" {...editHandlers(m, 'move')}>
                  {shape(m, true)}
                </g>
                {handlesOf(m).map((p, index) => {
                  const at = toScreen(p);
                  return (
                    <circle
                      key={index}
                      data-testid="measure-handle"
                      data-index={index}
                      cx={at.x}
                      cy={at.y}
                      r={5}
                      fill={COLOUR}
                      fillOpacity={0.35}
                      stroke={COLOUR}
                      strokeWidth={1}
                      style={{ pointerEvents: 'all', cursor: 'grab' }}
                      {...editHandlers(m, { handle: index })}
                    />
                  );
                })}
              </>
            ) : null}
          </g>
        ))}
        {live ? <g data-testid="measure-draft">{shape(live)}</g> : null}
      </svg>
      {[...onSlice, ...(live ? [live] : [])].map((m) => {
        const at = labelAt(m);
        return (
          <div
            key={m.id}
            className="overlay-text"
            data-testid={m.id === 'draft' ? 'measure-draft-label' : 'measure-label'}
            data-id={m.id}
            data-kind={m.kind}
            data-length-mm={m.length_mm ?? ''}
            data-area-mm2={m.area_mm2 ?? ''}
            data-mean={m.mean ?? ''}
            data-sd={m.sd ?? ''}
            data-value={m.value ?? ''}
            style={{ left: at.x, top: at.y, transform: at.before ? 'translateX(-100%)' : undefined, color: COLOUR, whiteSpace: 'nowrap', pointerEvents: m.id === 'draft' ? 'none' : 'auto' }}
          >
            {describeMeasurement(m)}
            {canEdit && m.id !== 'draft' ? (
              <button
                type="button"
                data-testid="measure-delete"
                title="Delete this measurement"
                onClick={() => void remove(m)}
                style={{ marginLeft: 4, padding: '0 4px', fontSize: 11, lineHeight: '14px' }}
              >
                ×
              </button>
            ) : null}
          </div>
        );
      })}
      {canEdit ? (
        <div data-testid="measure-tools" className="measure-tools">
          {TOOLS.map((t) => (
            <button
              key={t.kind}
              type="button"
              data-testid={`measure-${t.kind}`}
              title={t.title}
              className={tool === t.kind ? 'primary' : ''}
              onClick={() => {
                setTool((current) => (current === t.kind ? null : t.kind));
                setDraft(null);
              }}
            >
              {t.label}
            </button>
          ))}
          <span className="muted" style={{ alignSelf: 'center', fontSize: 12 }} data-testid="measure-count">
            {saved.length} kept
          </span>
        </div>
      ) : null}
      {error ? (
        <div className="overlay-text bc key-note" role="alert" data-testid="measure-error">
          {error}
        </div>
      ) : null}
    </>
  );
}
