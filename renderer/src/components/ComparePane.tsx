/**
 * A comparison pane of the viewer (panes 2-4 of a 1x2 or 2x2 layout): another series of the
 * study or of a prior study, with its own stack scroll, window/level, zoom and pan, the
 * four-corner overlay (study date, and PRIOR when the study is older than the primary's),
 * orientation markers and scale bar. Its slice is held by the pane sync (use-pane-sync.ts) so
 * linked panes follow each other by position; findings, review and measurements stay on pane 1.
 *
 * Mouse as on pane 1: wheel = slice, ctrl+wheel = zoom, drag = window/level, shift+drag = pan,
 * double-click = reset. A series thumbnail dropped on the pane replaces its series.
 */
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent, type PointerEvent as ReactPointerEvent } from 'react';
import type { Instance, Scan } from '../api/types.ts';
import { dicomDate } from '../dicom-date.ts';
import { edgeMarkers, scaleBar, screenDeltaToFrame, slicePositionMm, IDENTITY } from '../imaging/display-tools.ts';
import { autoWindow, dragWindow, renderFrame, type Window } from '../imaging/frame.ts';
import { isPrior } from '../imaging/layout.ts';
import { sliceOrientation, sliceSpacing, stackOf, type Slice } from '../imaging/stack.ts';
import type { Link } from '../imaging/sync.ts';
import { linkText } from '../imaging/sync.ts';
import { useFrames } from '../imaging/use-frames.ts';
import { drawSlice, imageTransform, pixelAspect, type View } from '../imaging/viewport.ts';
import { useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import { DisplayOverlay } from './DisplayOverlay.tsx';
import { SERIES_DRAG_TYPE } from './SeriesStrip.tsx';
import { ErrorState, Loading } from './StateMessage.tsx';
import { wheelSlices } from '../imaging/wheel-slices.ts';

const RESET_VIEW: View = { zoom: 1, panX: 0, panY: 0 };
/** Fewer background requests than pane 1's four: its frames come first. */
const PREFETCH = 2;

type Props = {
  pane: number;
  primary: Scan;
  scan: Scan | null;
  index: number | null;
  active: boolean;
  linked: boolean;
  link: Link | null;
  sync: boolean;
  onActivate(): void;
  onSlices(slices: readonly Slice[]): void;
  onScroll(index: number): void;
  onToggleLink(): void;
  onDropScan(scanId: string): void;
};

export function ComparePane(props: Props) {
  const { scan, pane, active, onActivate, onDropScan } = props;
  const onDragOver = (event: DragEvent) => {
    if (event.dataTransfer.types.includes(SERIES_DRAG_TYPE)) event.preventDefault();
  };
  const onDrop = (event: DragEvent) => {
    const id = event.dataTransfer.getData(SERIES_DRAG_TYPE);
    if (!id) return;
    event.preventDefault();
    onDropScan(id);
  };
  return (
    <div
      className={`viewport pane${active ? ' active' : ''}`}
      data-testid="viewer-pane"
      data-pane={pane}
      data-scan-id={scan?.scan_id ?? ''}
      onPointerDownCapture={onActivate}
      // The pane last scrolled takes the slice keys, as the one last clicked does.
      onWheelCapture={onActivate}
      onDragOver={onDragOver}
      onDrop={onDrop}
    >
      {scan ? (
        <PaneStack key={scan.scan_id} {...props} scan={scan} />
      ) : (
        <div className="state">
          <p className="muted">Drag a series here from the strip below, or select this pane and click one.</p>
        </div>
      )}
    </div>
  );
}

function PaneStack({ primary, scan, index, linked, link, sync, onSlices, onScroll, onToggleLink }: Props & { scan: Scan }) {
  const { client } = useSession();
  const loaded = useLoad((signal) => client.all<Instance>(`/v1/scans/${encodeURIComponent(scan.scan_id)}/instances`, { signal }), [client, scan.scan_id]);
  // On the loaded list, not on `loaded` (a new object each render): one stack per load.
  const instances = loaded.state === 'ready' ? loaded.value : null;
  const slices = useMemo(() => (instances ? stackOf(instances) : []), [instances]);
  useEffect(() => {
    if (slices.length > 0) onSlices(slices);
    // Reported once per loaded series (the handler's identity changes with the sync state).
  }, [slices]);

  const at = Math.max(0, Math.min(slices.length - 1, index ?? Math.floor(slices.length / 2)));
  const slice = slices[at] ?? null;
  const frames = useFrames(client, slices, at, PREFETCH);
  const [frameVersion, setFrameVersion] = useState(0);
  const [frameError, setFrameError] = useState<unknown>(null);
  const [windowing, setWindowing] = useState<Window | null>(null);
  const [view, setView] = useState<View>(RESET_VIEW);
  const [size, setSize] = useState({ width: 0, height: 0 });
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const boxRef = useRef<HTMLDivElement>(null);
  const scratch = useRef<HTMLCanvasElement | null>(null);
  const frame = frames.cached(slice);

  useEffect(() => {
    if (!slice) return;
    let cancelled = false;
    frames.load(slice).then(
      () => {
        if (!cancelled) {
          setFrameError(null);
          setFrameVersion((v) => v + 1);
        }
      },
      (error: unknown) => {
        if (!cancelled) setFrameError(error);
      },
    );
    return () => {
      cancelled = true;
    };
  }, [slice, frames]);

  useEffect(() => {
    const box = boxRef.current;
    if (!box) return;
    const observer = new ResizeObserver(() => setSize({ width: box.clientWidth, height: box.clientHeight }));
    observer.observe(box);
    setSize({ width: box.clientWidth, height: box.clientHeight });
    return () => observer.disconnect();
  }, []);

  const effectiveWindow = useMemo<Window | null>(() => (frame ? windowing ?? frame.defaultWindow ?? autoWindow(frame) : null), [frame, windowing]);
  const transform = useMemo(() => {
    const columns = frame?.columns ?? slice?.instance.columns ?? 1;
    const rows = frame?.rows ?? slice?.instance.rows ?? 1;
    // By physical aspect, as pane 1 draws.
    return imageTransform(size.width || 1, size.height || 1, columns, rows, view, pixelAspect(sliceSpacing(slice)));
  }, [frame, slice, size, view]);

  useEffect(() => {
    const canvas = canvasRef.current;
    if (!canvas || size.width === 0) return;
    const ratio = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(size.width * ratio)) canvas.width = Math.round(size.width * ratio);
    if (canvas.height !== Math.round(size.height * ratio)) canvas.height = Math.round(size.height * ratio);
    const ctx = canvas.getContext('2d');
    if (!ctx) return;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    let image: HTMLCanvasElement | null = null;
    if (frame && effectiveWindow) {
      scratch.current ??= document.createElement('canvas');
      image = scratch.current;
      if (image.width !== frame.columns || image.height !== frame.rows) {
        image.width = frame.columns;
        image.height = frame.rows;
      }
      const imageCtx = image.getContext('2d');
      if (imageCtx) {
        const pixels = imageCtx.createImageData(frame.columns, frame.rows);
        renderFrame(frame, effectiveWindow, pixels.data);
        imageCtx.putImageData(pixels, 0, 0);
      }
    }
    drawSlice(ctx, size.width, size.height, transform, { image, columns: frame?.columns ?? 1, rows: frame?.rows ?? 1, findings: [], currentFindingId: null, showBoxes: false });
    canvas.dataset['renderedSlice'] = frame ? String(at) : '';
  }, [frame, effectiveWindow, transform, size, at, frameVersion]);

  // The slice the last step went to: wheel events can come faster than the parent re-renders
  // with the new `at`, and each must step from where the one before it went, or steps are lost.
  const stepTarget = useRef(at);
  useEffect(() => {
    stepTarget.current = at;
  }, [at]);
  const step = useCallback(
    (delta: number) => {
      const next = Math.max(0, Math.min(slices.length - 1, stepTarget.current + delta));
      stepTarget.current = next;
      onScroll(next);
    },
    [onScroll, slices.length],
  );

  // Wheel: non-passive so the page does not scroll while the stack does.
  useEffect(() => {
    const canvas = canvasRef.current;
    if (!canvas) return;
    const onWheel = (event: WheelEvent) => {
      event.preventDefault();
      if (event.ctrlKey || event.metaKey) {
        const factor = event.deltaY < 0 ? 1.15 : 1 / 1.15;
        setView((v) => ({ ...v, zoom: Math.max(0.25, Math.min(16, v.zoom * factor)) }));
      } else step(wheelSlices(event));
    };
    canvas.addEventListener('wheel', onWheel, { passive: false });
    return () => canvas.removeEventListener('wheel', onWheel);
  }, [step]);

  const drag = useRef<{ mode: 'wl' | 'pan'; x: number; y: number; window: Window; view: View } | null>(null);
  const onPointerDown = (event: ReactPointerEvent<HTMLCanvasElement>) => {
    if (!effectiveWindow) return;
    const mode = event.button === 1 || event.shiftKey ? 'pan' : event.button === 0 ? 'wl' : null;
    if (!mode) return;
    event.currentTarget.setPointerCapture(event.pointerId);
    drag.current = { mode, x: event.clientX, y: event.clientY, window: effectiveWindow, view };
  };
  const onPointerMove = (event: ReactPointerEvent<HTMLCanvasElement>) => {
    const start = drag.current;
    if (!start) return;
    const dx = event.clientX - start.x;
    const dy = event.clientY - start.y;
    if (start.mode === 'pan') {
      const moved = screenDeltaToFrame(IDENTITY, dx, dy);
      setView({ ...start.view, panX: start.view.panX + moved.x, panY: start.view.panY + moved.y });
    } else if (frame) setWindowing(dragWindow(start.window, dx, dy, frame.max - frame.min));
  };
  const onPointerUp = () => {
    drag.current = null;
  };

  const prior = isPrior(primary, scan);
  const position = slicePositionMm(slice);
  const otherStudy = scan.study_uid !== primary.study_uid;
  return (
    <div className="pane-box" ref={boxRef}>
      <canvas
        ref={canvasRef}
        data-testid="pane-canvas"
        data-slice-index={at}
        data-position={position ?? ''}
        onPointerDown={onPointerDown}
        onPointerMove={onPointerMove}
        onPointerUp={onPointerUp}
        onPointerCancel={onPointerUp}
        onDoubleClick={() => {
          setView(RESET_VIEW);
          setWindowing(null);
        }}
        onContextMenu={(event) => event.preventDefault()}
      />
      <div className="overlay-text tl" data-testid="pane-overlay-tl">
        {prior ? (
          <span className="prior-badge" data-testid="prior-label">
            PRIOR
          </span>
        ) : null}{' '}
        <span data-testid="pane-study-date">{dicomDate(scan.study_date)}</span> {scan.study_description ?? ''}
        <br />
        {scan.modality} {scan.body_part ?? ''} · Series {scan.series_number ?? '—'} {scan.description ?? ''}
      </div>
      <div className="overlay-text tr" data-testid="pane-slice">
        Slice {slices.length > 0 ? `${at + 1} / ${slices.length}` : '—'}
        {slice && slice.instance.frames > 1 ? ` (frame ${slice.frame + 1})` : ''}
        {position !== null ? (
          <>
            <br />
            Pos {position.toFixed(1)} mm
          </>
        ) : null}
      </div>
      <DisplayOverlay markers={edgeMarkers(sliceOrientation(slice), IDENTITY)} bar={scaleBar(transform.scale / (sliceSpacing(slice)?.[1] ?? NaN), size.width, slice?.instance.pixel_spacing_source)} />
      <div className="overlay-text bl">
        {effectiveWindow ? `W ${Math.round(effectiveWindow.width)} / L ${Math.round(effectiveWindow.center)}` : ''}
        <br />
        Zoom {Math.round(transform.scale * 100)}%
      </div>
      <div className="pane-sync">
        <label className="check" title={otherStudy ? 'Align this pane with pane 1 by eye first: the offset between them at that moment is kept.' : 'Same study: slices follow pane 1 by patient position.'}>
          <input type="checkbox" checked={linked} onChange={onToggleLink} data-testid="pane-link" /> Link
        </label>{' '}
        <span data-testid="pane-sync" data-link-mode={link?.mode ?? 'off'}>
          {!sync ? 'Sync is off' : !linked ? (otherStudy ? 'Not linked: another study has its own coordinates. Align it by eye, then Link.' : 'Not linked') : link ? linkText(link) : ''}
        </span>
      </div>
      {loaded.state === 'loading' || (slice && !frame && !frameError) ? (
        <div className="state">
          <Loading what="image" />
        </div>
      ) : null}
      {loaded.state === 'error' ? (
        <div className="state">
          <ErrorState error={loaded.error} retry={loaded.reload} />
        </div>
      ) : null}
      {frameError ? (
        <div className="state">
          <ErrorState error={frameError} />
        </div>
      ) : null}
    </div>
  );
}
