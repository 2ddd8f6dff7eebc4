/**
 * The viewer: one series as a stack, window/level, zoom and pan, finding boxes on the slices
 * they belong to, a confidence threshold, jump-to-finding and accept/reject per finding.
 *
 * Mouse: wheel = slice, ctrl+wheel = zoom, drag = window/level, shift+drag or middle drag = pan,
 * double-click = reset. Keys: ↑/↓ PgUp/PgDn Home/End slices, 1-6 window presets, +/- zoom,
 * 0 reset, n/p next/previous finding, a accept, r reject, u undo review, shift+A analyse (again),
 * ]/[ next/previous scan, Esc back to the worklist.
 *
 * a/r/u act only on a finding the reader can see - on the displayed slice and at or above the
 * threshold - so a key press never records a verdict on a box that is not on screen; otherwise
 * a status line says why nothing happened. The Accept/Reject buttons of the findings list follow
 * the same rule (issue 11): a finding that is not on screen has its buttons disabled, with the
 * reason as their tooltip and, for the selected finding, under them.
 */
import { useCallback, useEffect, useMemo, useRef, useState, type PointerEvent as ReactPointerEvent } from 'react';
import { ApiError } from '../api/client.ts';
import type { Finding, Instance, Lesion, Scan, ScanResult } from '../api/types.ts';
import type { FindingReview } from '../../../common/vocabulary.ts';
import { isActive, useAnalyses } from '../analyses.ts';
import { AnalyseButton, AnalysisStatus, useCanAnalyse, useRequestAnalysis } from '../components/AnalysisControls.tsx';
import { ModelTag } from '../components/ClinicalBanner.tsx';
import { ErrorState, InlineError, Loading } from '../components/StateMessage.tsx';
import { dateTime, dicomDate, labelText, percent } from '../format.ts';
import { autoWindow, dragWindow, presetsFor, renderFrame, type Preset, type Window } from '../imaging/frame.ts';
import { useFrames } from '../imaging/use-frames.ts';
import { sliceOrientation, sliceSpacing, stackOf, type Slice } from '../imaging/stack.ts';
import { drawSlice, imageTransform, pixelAspect, type View } from '../imaging/viewport.ts';
import { applyOrient, edgeMarkers, orientedSize, scaleBar, screenDeltaToFrame, slicePositionMm } from '../imaging/display-tools.ts';
import { useDisplayTools } from '../imaging/use-display-tools.ts';
import { DisplayControls, DisplayOverlay } from '../components/DisplayOverlay.tsx';
import { MeasureLayer } from '../components/MeasureLayer.tsx';
import { FindingDrawLayer } from '../components/FindingDrawLayer.tsx';
import { RejectReason } from '../components/RejectReason.tsx';
import { SERIES_DRAG_TYPE, SeriesStrip, usePatientSeries } from '../components/SeriesStrip.tsx';
import { ComparePane } from '../components/ComparePane.tsx';
import { LayoutControls } from '../components/LayoutControls.tsx';
import { nextLayout } from '../imaging/layout.ts';
import { usePaneSync } from '../imaging/use-pane-sync.ts';
import { PatientName } from '../components/PatientName.tsx';
import { navigate } from '../route.ts';
import { boxSizeText, lesionRows, lesionText } from '../lesion-text.ts';
import { hasScope, useSession } from '../session.ts';
import { useLoad } from '../use-load.ts';
import { wheelSlices } from '../imaging/wheel-slices.ts';

type ViewerData = { scan: Scan; result: ScanResult | null; slices: Slice[]; imagesProblem: string | null };

const RESET_VIEW: View = { zoom: 1, panX: 0, panY: 0 };

async function orNull<T>(promise: Promise<T>): Promise<T | null> {
  try {
    return await promise;
  } catch (error) {
    if (error instanceof ApiError && error.info.status === 404) return null;
    throw error;
  }
}

/** Why a reported scan's findings offer no Accept/Reject (issue 11: the final report locks them). */
const REPORTED_LOCK = 'This scan is reported: its final report locks these verdicts. To change one, add an addendum to the report.';

export function Viewer({ scanId }: { scanId: string }) {
  const session = useSession();
  const { client, me, scanOrder } = session;
  const canReview = hasScope(me, 'write:reports');
  const path = `/v1/scans/${encodeURIComponent(scanId)}`;

  const data = useLoad<ViewerData>(
    async (signal) => {
      const [scan, result, instances] = await Promise.all([
        client.get<Scan>(path, { signal }),
        orNull(client.get<ScanResult>(`${path}/results`, { signal })),
        orNull(client.all<Instance>(`${path}/instances`, { signal })),
      ]);
      const slices = stackOf(instances ?? []);
      const imagesProblem = instances === null ? 'This server does not offer images for this scan.' : slices.length === 0 ? 'This scan has no stored images.' : null;
      return { scan, result, slices, imagesProblem };
    },
    [client, path],
  );

  // A run of this scan ended (here or on the worklist): load its result.
  const run = useAnalyses().runs.get(scanId);
  const ended = run && !isActive(run) ? `${run.jobId ?? ''}:${run.phase}` : null;
  const { reload } = data;
  useEffect(() => {
    if (ended) reload();
  }, [ended, reload]);

  if (data.state === 'loading') return <Loading what="scan" />;
  if (data.state === 'error') return <ErrorState error={data.error} retry={data.reload} />;
  const neighbours = { index: scanOrder.indexOf(scanId), order: scanOrder };
  // A new analysis brings new findings: a fresh stack starts on its first finding.
  return <Stack key={`${scanId}:${data.value.result?.analysis.id ?? ''}`} data={data.value} canReview={canReview} neighbours={neighbours} />;
}

function Stack({ data, canReview, neighbours }: { data: ViewerData; canReview: boolean; neighbours: { index: number; order: readonly string[] } }) {
  const { client } = useSession();
  const analyses = useAnalyses();
  const canAnalyse = useCanAnalyse();
  const requestAnalysis = useRequestAnalysis();
  const { scan, slices, result } = data;
  const [findings, setFindings] = useState<Finding[]>(result?.findings ?? []);
  const [index, setIndex] = useState(() => {
    const first = result?.findings[0];
    const at = first ? slices.findIndex((s) => s.instance.instance_uid === first.instance_uid && s.frame === first.frame) : -1;
    return at >= 0 ? at : Math.floor(slices.length / 2);
  });
  const [currentId, setCurrentId] = useState<string | null>(result?.findings[0]?.id ?? null);
  const [threshold, setThreshold] = useState(0);
  const [showBoxes, setShowBoxes] = useState(true);
  const [windowing, setWindowing] = useState<Window | null>(null);
  const [presetName, setPresetName] = useState('Default');
  const [view, setView] = useState<View>(RESET_VIEW);
  const [frameVersion, setFrameVersion] = useState(0);
  const [frameError, setFrameError] = useState<unknown>(null);
  const [retries, setRetries] = useState(0);
  const [reviewError, setReviewError] = useState<unknown>(null);
  /** Why the last a/r/u key did nothing; cleared when the slice or threshold changes. */
  const [keyNote, setKeyNote] = useState<string | null>(null);
  const [size, setSize] = useState({ width: 0, height: 0 });
  // Invert, rotate/flip and cine (a loop through the stack): use-display-tools.ts.
  const advance = useCallback(() => setIndex((i) => (i + 1) % Math.max(1, slices.length)), [slices.length]);
  const tools = useDisplayTools(slices.length, advance);
  // Layouts and synchronized scrolling (issue 11, study-level reading): pane 1 is this scan.
  const patientScans = usePatientSeries(scan.patient_id);
  const panes = usePaneSync(scan, patientScans, slices, index, setIndex);

  const canvasRef = useRef<HTMLCanvasElement>(null);
  const boxRef = useRef<HTMLDivElement>(null);
  const frames = useFrames(client, slices, index);
  const loadFrame = frames.load;
  const scratch = useRef<HTMLCanvasElement | null>(null);

  const slice = slices[index] ?? null;
  const frame = frames.cached(slice);
  const visible = useMemo(() => findings.filter((f) => f.confidence >= threshold), [findings, threshold]);
  const onSlice = useMemo(
    () => (slice ? visible.filter((f) => f.instance_uid === slice.instance.instance_uid && f.frame === slice.frame) : []),
    [visible, slice],
  );
  const sliceOf = useCallback(
    (f: Finding) => slices.findIndex((s) => s.instance.instance_uid === f.instance_uid && s.frame === f.frame),
    [slices],
  );

  // The current slice first, then the whole series in the background so scrolling is smooth.
  useEffect(() => {
    if (!slice) return;
    let cancelled = false;
    loadFrame(slice).then(
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
  }, [slice, loadFrame, retries]);

  // Size the canvas to its box, in device pixels.
  useEffect(() => {
    const box = boxRef.current;
    if (!box) return;
    const observer = new ResizeObserver(() => setSize({ width: box.clientWidth, height: box.clientHeight }));
    observer.observe(box);
    setSize({ width: box.clientWidth, height: box.clientHeight });
    return () => observer.disconnect();
  }, []);

  const effectiveWindow = useMemo<Window | null>(() => {
    if (!frame) return null;
    return windowing ?? frame.defaultWindow ?? autoWindow(frame);
  }, [frame, windowing]);

  const transform = useMemo(() => {
    const columns = frame?.columns ?? slice?.instance.columns ?? 1;
    const rows = frame?.rows ?? slice?.instance.rows ?? 1;
    // Drawn by physical aspect: non-square pixels (Pixel Spacing, or Imager Pixel Spacing on a
    // radiograph) must not be drawn square, and the boxes go through the same transform.
    // Fitted in the canvas as the image is turned (sides swapped after a quarter turn).
    const fitIn = orientedSize(size, tools.orient);
    return imageTransform(fitIn.width || 1, fitIn.height || 1, columns, rows, view, pixelAspect(sliceSpacing(slice)));
  }, [frame, slice, size, view, tools.orient]);

  // Draw: window the frame into a scratch canvas, then draw it and the boxes through the transform.
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
        renderFrame(frame, effectiveWindow, pixels.data, { invert: tools.invert });
        imageCtx.putImageData(pixels, 0, 0);
      }
    }
    applyOrient(ctx, size, tools.orient);
    const fitIn = orientedSize(size, tools.orient);
    const masks = drawSlice(ctx, fitIn.width, fitIn.height, transform, {
      image,
      columns: frame?.columns ?? 1,
      rows: frame?.rows ?? 1,
      findings: onSlice,
      currentFindingId: currentId,
      showBoxes: showBoxes && frame !== null,
    });
    canvas.dataset['renderedSlice'] = frame ? String(index) : '';
    canvas.dataset['masksDrawn'] = String(masks);
  }, [frame, effectiveWindow, transform, onSlice, currentId, showBoxes, size, index, frameVersion, tools.orient, tools.invert]);

  useEffect(() => setKeyNote(null), [index, threshold]);

  /** The finding a review key acts on, or why there is none the reader can see. */
  const reviewTarget = useCallback((): { finding: Finding } | { why: string } => {
    if (findings.length === 0) return { why: result ? 'This scan has no findings to review.' : 'This scan has no AI result to review.' };
    const current = onSlice.find((f) => f.id === currentId);
    if (current) return { finding: current };
    const only = onSlice.length === 1 ? onSlice[0] : undefined;
    if (only) return { finding: only };
    if (onSlice.length > 1) return { why: `${onSlice.length} findings on this slice: click one in the list (or press n/p) to choose.` };
    const below = slice ? findings.filter((f) => f.instance_uid === slice.instance.instance_uid && f.frame === slice.frame) : [];
    if (below.length > 0) return { why: `The finding on this slice is below the ${percent(threshold)} threshold: lower it to review the finding.` };
    return { why: 'No finding on this slice: press n to go to the next finding.' };
  }, [findings, onSlice, currentId, slice, threshold, result]);

  /** Why a finding's Accept/Reject buttons are disabled, or null when its box is on screen. */
  const notOnScreen = useCallback(
    (finding: Finding, at: number): string | null => {
      if (at < 0) return 'Its image is not in this series, so its box cannot be shown: it cannot be reviewed here.';
      if (finding.confidence < threshold) return `Below the ${percent(threshold)} threshold, so its box is hidden: lower the threshold to review it.`;
      if (at !== index) return `On slice ${at + 1}, not the slice shown (${index + 1}): click the finding to go to its slice first.`;
      return null;
    },
    [threshold, index],
  );

  const step = useCallback((delta: number) => setIndex((i) => Math.max(0, Math.min(slices.length - 1, i + delta))), [slices.length]);

  const jumpTo = useCallback(
    (finding: Finding) => {
      setCurrentId(finding.id);
      const at = sliceOf(finding);
      if (at >= 0) setIndex(at);
    },
    [sliceOf],
  );

  const cycleFinding = useCallback(
    (delta: number) => {
      if (visible.length === 0) return;
      const at = visible.findIndex((f) => f.id === currentId);
      const next = visible[(at + delta + visible.length) % visible.length];
      if (next) jumpTo(next);
    },
    [visible, currentId, jumpTo],
  );

  // Lesions are grouped, and their verdict derived, by the server (server/findings/lesions.ts):
  // after every verdict or added finding the list is read again, so it is never the stale one
  // of the page load. Only the newest answer is kept when verdicts come quickly one after another.
  const [lesions, setLesions] = useState<Lesion[]>(result?.lesions ?? []);
  const lesionRequest = useRef(0);
  const refreshLesions = useCallback(async () => {
    const mine = ++lesionRequest.current;
    try {
      const fresh = await client.get<ScanResult>(`/v1/scans/${encodeURIComponent(scan.scan_id)}/results`);
      if (mine === lesionRequest.current) setLesions(fresh.lesions);
    } catch {
      // The list keeps its last known grouping; the verdict itself was saved and shown.
    }
  }, [client, scan.scan_id]);

  const review = useCallback(
    async (finding: Finding, verdict: FindingReview | null) => {
      setReviewError(null);
      try {
        const updated = await client.patch<Finding>(`/v1/findings/${encodeURIComponent(finding.id)}`, { body: { review: verdict } });
        setFindings((list) => list.map((f) => (f.id === finding.id ? { ...f, review: updated.review, review_reason: updated.review_reason, review_disputed: updated.review_disputed } : f)));
        void refreshLesions();
      } catch (error) {
        setReviewError(error);
      }
    },
    [client, refreshLesions],
  );

  const presets = useMemo(() => presetsFor(scan.modality), [scan.modality]);
  const applyPreset = useCallback(
    (preset: Preset) => {
      setPresetName(preset.name);
      if (preset.window === 'default') setWindowing(null);
      else if (preset.window === 'auto') setWindowing(frame ? autoWindow(frame) : null);
      else setWindowing(preset.window);
    },
    [frame],
  );

  const goScan = useCallback(
    (delta: number) => {
      const target = neighbours.order[neighbours.index + delta];
      if (neighbours.index >= 0 && target) navigate({ name: 'viewer', scanId: target });
    },
    [neighbours],
  );

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target;
      if (target instanceof HTMLTextAreaElement || (target instanceof HTMLInputElement && target.type !== 'range' && target.type !== 'checkbox')) return;
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const preset = presets.find((p) => p.key === event.key);
      const paneDelta = { ArrowUp: -1, ArrowLeft: -1, ArrowDown: 1, ArrowRight: 1, PageUp: -10, PageDown: 10 }[event.key];
      if (preset) applyPreset(preset);
      else if (event.key === 'l') panes.setLayout(nextLayout(panes.layout));
      else if (event.key === 's' && panes.layout !== '1x1') panes.toggleSync();
      // Slice keys move the selected pane; a comparison pane moves the linked others with it.
      else if (paneDelta !== undefined && panes.active > 1) panes.step(panes.active, paneDelta);
      else if (event.key === 'ArrowUp' || event.key === 'ArrowLeft') step(-1);
      else if (event.key === 'ArrowDown' || event.key === 'ArrowRight') step(1);
      else if (event.key === 'PageUp') step(-10);
      else if (event.key === 'PageDown') step(10);
      else if (event.key === 'Home') setIndex(0);
      else if (event.key === 'End') setIndex(slices.length - 1);
      else if (event.key === '+' || event.key === '=') setView((v) => ({ ...v, zoom: Math.min(16, v.zoom * 1.25) }));
      else if (event.key === '-') setView((v) => ({ ...v, zoom: Math.max(0.25, v.zoom / 1.25) }));
      else if (event.key === '0') setView(RESET_VIEW);
      else if (event.key === 'n') cycleFinding(1);
      else if (event.key === 'p') cycleFinding(-1);
      else if (event.key === 'b') setShowBoxes((s) => !s);
      else if ((event.key === 'a' || event.key === 'r' || event.key === 'u') && canReview) {
        const target = reviewTarget();
        if (scan.status === 'reported') {
          // The server refuses it too (409): a final report locks the verdicts it was built on.
          setKeyNote(REPORTED_LOCK);
        } else if ('why' in target) {
          setKeyNote(target.why);
        } else {
          const { finding } = target;
          const verdict: FindingReview | null =
            event.key === 'u'
              ? null
              : event.key === 'a'
                ? finding.review === 'accepted' && !finding.review_disputed
                  ? null
                  : 'accepted'
                : finding.review === 'rejected' && !finding.review_disputed
                  ? null
                  : 'rejected';
          setKeyNote(null);
          setCurrentId(finding.id);
          void review(finding, verdict);
        }
      } else if (event.key === 'A' && canAnalyse) void requestAnalysis(scan, findings.some((f) => f.review !== null));
      else if (event.key === ']') goScan(1);
      else if (event.key === '[') goScan(-1);
      else if (event.key === 'Escape') navigate({ name: 'worklist' });
      else return;
      event.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [findings, presets, applyPreset, step, slices.length, cycleFinding, canReview, review, reviewTarget, goScan, canAnalyse, requestAnalysis, scan, panes]);

  // Wheel: a non-passive listener so the page does not scroll while the stack does.
  useEffect(() => {
    const canvas = canvasRef.current;
    if (!canvas) return;
    const onWheel = (event: WheelEvent) => {
      event.preventDefault();
      if (event.ctrlKey || event.metaKey) {
        const factor = event.deltaY < 0 ? 1.15 : 1 / 1.15;
        setView((v) => ({ ...v, zoom: Math.max(0.25, Math.min(16, v.zoom * factor)) }));
      } else {
        step(wheelSlices(event));
      }
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
      // The pan is applied before the turn/mirror: move the image the way the hand moves on screen.
      const moved = screenDeltaToFrame(tools.orient, dx, dy);
      setView({ ...start.view, panX: start.view.panX + moved.x, panY: start.view.panY + moved.y });
    } else if (frame) {
      setWindowing(dragWindow(start.window, dx, dy, frame.max - frame.min));
      setPresetName('Custom');
    }
  };
  const onPointerUp = () => {
    drag.current = null;
  };

  const sliceNumber = slices.length > 0 ? `${index + 1} / ${slices.length}` : '—';

  return (
    <section className="viewer" data-testid="viewer" data-scan-id={scan.scan_id}>
      <div className="viewer-main">
        <div className="viewer-bar">
          <button type="button" onClick={() => navigate({ name: 'worklist' })} title="Back to the worklist (Esc)">
            ← Worklist
          </button>
          <button type="button" onClick={() => goScan(-1)} disabled={neighbours.index <= 0} title="Previous scan ([)">
            ‹ Prev scan
          </button>
          <button type="button" onClick={() => goScan(1)} disabled={neighbours.index < 0 || neighbours.index >= neighbours.order.length - 1} title="Next scan (])">
            Next scan ›
          </button>
          {/* Shortened with an ellipsis when the bar is full: the tooltip keeps the whole title. */}
          <strong title={`${scan.patient_id} · ${scan.modality} · ${scan.description ?? scan.study_description ?? ''}`}>
            {scan.patient_id} · {scan.modality} · {scan.description ?? scan.study_description ?? ''}
          </strong>
          <span className="muted">{dicomDate(scan.study_date)}</span>
          <span className="spacer" />
          {presets.map((preset) => (
            <button key={preset.key} type="button" onClick={() => applyPreset(preset)} title={`Window preset (${preset.key})`} className={presetName === preset.name ? 'primary' : ''}>
              {preset.name}
            </button>
          ))}
          <button type="button" onClick={() => setView(RESET_VIEW)} title="Reset zoom and pan (0)">
            Fit
          </button>
          <button type="button" onClick={() => navigate({ name: 'report', scanId: scan.scan_id })} data-testid="open-report">
            Report
          </button>
        </div>
        <div className={`viewer-grid layout-${panes.layout}`} data-testid="viewer-grid" data-layout={panes.layout}>
        <div
          className={`viewport${panes.layout !== '1x1' && panes.active === 1 ? ' active' : ''}`}
          ref={boxRef}
          data-testid="viewer-pane"
          data-pane={1}
          data-scan-id={scan.scan_id}
          onPointerDownCapture={() => panes.setActive(1)}
          onWheelCapture={() => panes.setActive(1)}
          onDragOver={(event) => {
            if (event.dataTransfer.types.includes(SERIES_DRAG_TYPE)) event.preventDefault();
          }}
          onDrop={(event) => {
            // Pane 1 is the scan the viewer reads: a series dropped on it is opened as that scan.
            const id = event.dataTransfer.getData(SERIES_DRAG_TYPE);
            if (!id) return;
            event.preventDefault();
            if (id !== scan.scan_id) navigate({ name: 'viewer', scanId: id });
          }}
        >
          <canvas
            ref={canvasRef}
            data-testid="viewport-canvas"
            data-slice-index={index}
            data-scale={transform.scale}
            data-scale-y={transform.scaleY}
            data-offset-x={transform.offsetX}
            data-offset-y={transform.offsetY}
            onPointerDown={onPointerDown}
            onPointerMove={onPointerMove}
            onPointerUp={onPointerUp}
            onPointerCancel={onPointerUp}
            onDoubleClick={() => {
              setView(RESET_VIEW);
              tools.reset();
              setWindowing(null);
              setPresetName('Default');
            }}
            onContextMenu={(event) => event.preventDefault()}
          />
          <div className="overlay-text tl" data-testid="overlay-tl">
            <PatientName instanceUid={slices[0]?.instance.instance_uid ?? null} />
            {scan.patient_id}
            <br />
            {dicomDate(scan.study_date)} {scan.study_description ?? ''}
            <br />
            {scan.modality} {scan.body_part ?? ''} · Series {scan.series_number ?? '—'} {scan.description ?? ''}
          </div>
          <div className="overlay-text tr" data-testid="slice-number">
            Slice {sliceNumber}
            {slice && slice.instance.frames > 1 ? ` (frame ${slice.frame + 1})` : ''}
            {slicePositionMm(slice) !== null ? <><br />Pos {slicePositionMm(slice)?.toFixed(1)} mm</> : null}
          </div>
          <DisplayOverlay
            markers={edgeMarkers(sliceOrientation(slice), tools.orient)}
            bar={scaleBar(transform.scale / (sliceSpacing(slice)?.[1] ?? NaN), size.width, slice?.instance.pixel_spacing_source)}
          />
          <MeasureLayer client={client} scanId={scan.scan_id} modality={scan.modality} slice={slice} frame={frame} transform={transform} orient={tools.orient} size={size} canEdit={canReview} />
          {canReview && result ? (
            <FindingDrawLayer
              client={client}
              scanId={scan.scan_id}
              slice={slice}
              transform={transform}
              orient={tools.orient}
              size={size}
              locked={scan.status === 'reported'}
              onAdded={(f) => {
                setFindings((list) => [...list, f]);
                void refreshLesions();
              }}
            />
          ) : null}
          <div className="overlay-text bl" data-testid="window-readout">
            {effectiveWindow ? `W ${Math.round(effectiveWindow.width)} / L ${Math.round(effectiveWindow.center)} · ${presetName}` : ''}
            <br />
            Zoom {Math.round(transform.scale * 100)}%{tools.invert ? ' · inverted' : ''}
          </div>
          {keyNote ? (
            <div className="overlay-text bc key-note" role="status" data-testid="key-status">
              {keyNote}
            </div>
          ) : null}
          {slice?.instance.frames_problem ? (
            // Rescale and place of each frame are unknown: the picture may be wrong, so say so.
            <div className="overlay-text tc key-note" role="alert" data-testid="frames-problem">
              Frame values not read: {slice.instance.frames_problem}. Shown with the shared rescale and window.
            </div>
          ) : null}
          {showBoxes && frame && onSlice.some((f) => f.localization === 'image') ? (
            // Said in words too: a classifier's finding is about this slice, not a place on it.
            <div className="overlay-text image-finding" role="note" data-testid="image-finding-banner">
              {onSlice
                .filter((f) => f.localization === 'image')
                .map((f) => `${labelText(f.label)} ${percent(f.confidence)}`)
                .join(', ')}
              : whole-image finding (the model scored this slice; it does not say where)
            </div>
          ) : null}
          <div className="overlay-text br">{result ? `${result.analysis.model.name} v${result.analysis.model.version} · not for clinical use` : 'No AI result'}</div>
          {data.imagesProblem ? (
            <div className="state">
              <h3>No images to show</h3>
              <p>{data.imagesProblem} Re-import the series from the Import screen; the findings are listed on the right.</p>
            </div>
          ) : null}
          {!data.imagesProblem && !frame && !frameError ? (
            <div className="state">
              <Loading what="image" />
            </div>
          ) : null}
          {frameError ? (
            <div className="state">
              <ErrorState
                error={frameError}
                retry={() => {
                  setFrameError(null);
                  setRetries((r) => r + 1);
                }}
              />
            </div>
          ) : null}
        </div>
        {panes.panes.map((p, k) => (
          <ComparePane
            key={k}
            pane={k + 2}
            primary={scan}
            scan={p.scan}
            index={p.index}
            active={panes.active === k + 2}
            linked={p.linked}
            link={p.link}
            sync={panes.sync}
            onActivate={() => panes.setActive(k + 2)}
            onSlices={(list) => panes.setSlices(k + 2, list)}
            onScroll={(to) => panes.scroll(k + 2, to)}
            onToggleLink={() => panes.toggleLink(k + 2)}
            onDropScan={(id) => {
              const target = patientScans?.find((s) => s.scan_id === id);
              if (target) panes.show(k + 2, target);
            }}
          />
        ))}
        </div>
        {slices.length > 1 ? (
          <input
            className="slice-bar"
            type="range"
            min={0}
            max={slices.length - 1}
            value={index}
            onChange={(e) => setIndex(Number(e.target.value))}
            aria-label="Slice"
            data-testid="slice-slider"
          />
        ) : null}
        <DisplayControls tools={tools} slices={slices.length} instanceUid={slice?.instance.instance_uid ?? null}>
          <LayoutControls layout={panes.layout} onLayout={panes.setLayout} sync={panes.sync} onSync={panes.toggleSync} />
        </DisplayControls>
        <SeriesStrip
          scan={scan}
          scans={patientScans}
          shownIn={new Map([[scan.scan_id, 1], ...panes.panes.flatMap((p, k): [string, number][] => (p.scan ? [[p.scan.scan_id, k + 2]] : []))])}
          onPick={(picked) => {
            // A click fills the selected comparison pane; on pane 1 (or in 1x1) it opens the series.
            if (panes.active > 1) panes.show(panes.active, picked);
            else if (picked.scan_id !== scan.scan_id) navigate({ name: 'viewer', scanId: picked.scan_id });
          }}
        />
      </div>
      <aside className="side">
        <div>
          <h3>AI result</h3>
          {result ? (
            <>
              <ModelTag name={result.analysis.model.name} version={result.analysis.model.version} />
              <p className="muted">Analysed {dateTime(result.analysis.finished_at)}</p>
              <p>
                <b>Recommendation:</b> {result.recommendation || '—'}
              </p>
            </>
          ) : (
            <p className="muted" data-testid="no-result">
              {scan.status === 'queued' || scan.status === 'analyzing'
                ? 'Analysis is running; findings appear here when it finishes.'
                : scan.status === 'failed'
                  ? `The last analysis failed: ${scan.status_reason ?? 'no reason given'}.`
                  : scan.status === 'received' && scan.status_reason
                    ? // An analysis ended without a result (not applicable, cancelled): the
                      // server's reason, not "not analysed yet", which would invite the same run.
                      `No AI result: ${scan.status_reason}.`
                  : canAnalyse
                    ? 'This scan has not been analysed yet: press Analyse (shift+A).'
                    : 'This scan has not been analysed yet. Ask a colleague with the write:scans scope (or an admin) to analyse it.'}
            </p>
          )}
          {canAnalyse ? (
            <div className="analyse-row">
              <AnalyseButton scan={scan} compact={result !== null} reviewedHere={findings.some((f) => f.review !== null)} />
            </div>
          ) : null}
          <AnalysisStatus run={analyses.runs.get(scan.scan_id)} />
        </div>
        {result ? (
          <div>
            <label>
              Confidence threshold: {percent(threshold)}
              <input
                type="range"
                min={0}
                max={1}
                step={0.01}
                value={threshold}
                onChange={(e) => setThreshold(Number(e.target.value))}
                data-testid="threshold"
              />
            </label>
            <label className="check">
              <input type="checkbox" checked={showBoxes} onChange={(e) => setShowBoxes(e.target.checked)} /> Show boxes (b)
            </label>
          </div>
        ) : null}
        {result ? (
          <div data-testid="findings">
            <h3>
              Findings ({visible.length}
              {visible.length !== findings.length ? ` of ${findings.length}` : ''})
            </h3>
            {findings.length === 0 ? <p className="muted">The model found nothing above its thresholds.</p> : null}
            {lesionRows(findings, lesions).map(({ finding, lesion, first }) => {
              const at = sliceOf(finding);
              const below = finding.confidence < threshold;
              const blocked = notOnScreen(finding, at);
              return (
                <div
                  key={finding.id}
                  className={`finding${finding.id === currentId ? ' current' : ''}${below ? ' below' : ''}${lesion && !first ? ' in-lesion' : ''}`}
                  onClick={() => jumpTo(finding)}
                  data-testid="finding"
                  data-finding-id={finding.id}
                  data-review={finding.review ?? ''}
                  data-localization={finding.localization ?? 'box'}
                  data-lesion-id={lesion?.id ?? ''}
                >
                  {lesion && first ? (
                    <div className="lesion-head" data-testid="lesion">
                      One lesion: {lesionText(lesion, new Map(findings.map((f) => [f.id, f.place])))}
                      <span className="muted" data-testid="lesion-review">
                        {' '}
                        · {lesion.review ?? 'not reviewed'}
                      </span>
                    </div>
                  ) : null}
                  <div className="row">
                    <b className="grow">{labelText(finding.label)}</b>
                    <span data-testid="finding-source">{finding.source === 'reader' ? 'drawn by reader' : percent(finding.confidence)}</span>
                  </div>
                  <div className="row muted">
                    <span className="grow">
                      {at >= 0 ? `slice ${at + 1}` : 'image not in this series'}
                      {finding.localization === 'image' ? ', whole image (no location)' : finding.place ? `, ${boxSizeText(finding.place)}` : ''}
                    </span>
                    {finding.review ? <span className={`review-${finding.review}`}>{finding.review}</span> : <span>not reviewed</span>}
                  </div>
                  {finding.review_disputed ? (
                    <div className="review-disputed" data-testid="finding-disputed" title="Readers on two workstations recorded different verdicts while apart; the later one is shown. Record yours to settle it.">
                      Disputed: readers disagree. Record your verdict to settle it.
                    </div>
                  ) : null}
                  {canReview && scan.status !== 'reported' ? (
                    // The row's title carries the reason too: a disabled button may not show its own.
                    <div className="row" title={blocked ?? undefined}>
                      <button
                        type="button"
                        onClick={(e) => {
                          e.stopPropagation();
                          void review(finding, finding.review === 'accepted' && !finding.review_disputed ? null : 'accepted');
                        }}
                        disabled={blocked !== null}
                        data-testid="accept-finding"
                        className={finding.review === 'accepted' ? 'primary' : ''}
                        title={blocked ?? 'Accept (a)'}
                      >
                        ✓ Accept
                      </button>
                      <button
                        type="button"
                        onClick={(e) => {
                          e.stopPropagation();
                          void review(finding, finding.review === 'rejected' && !finding.review_disputed ? null : 'rejected');
                        }}
                        disabled={blocked !== null}
                        data-testid="reject-finding"
                        className={finding.review === 'rejected' ? 'danger' : ''}
                        title={blocked ?? 'Reject (r)'}
                      >
                        ✗ Reject
                      </button>
                    </div>
                  ) : null}
                  {canReview && scan.status !== 'reported' && finding.review === 'rejected' ? (
                    <RejectReason
                      client={client}
                      finding={finding}
                      onSaved={(u) => {
                        setFindings((list) => list.map((f) => (f.id === u.id ? { ...f, review: u.review, review_reason: u.review_reason } : f)));
                        void refreshLesions();
                      }}
                    />
                  ) : null}
                  {canReview && blocked !== null && finding.id === currentId ? (
                    <div className="muted review-blocked" data-testid="review-blocked">
                      {blocked}
                    </div>
                  ) : null}
                </div>
              );
            })}
            {!canReview && findings.length > 0 ? <p className="muted">Reviewing findings needs the write:reports scope; ask an admin.</p> : null}
            {canReview && scan.status === 'reported' && findings.length > 0 ? (
              <p className="muted" data-testid="review-locked">
                {REPORTED_LOCK}{' '}
                <button type="button" onClick={() => navigate({ name: 'report', scanId: scan.scan_id })} data-testid="open-addendum">
                  Add an addendum
                </button>
              </p>
            ) : null}
            <InlineError error={reviewError} />
          </div>
        ) : null}
        {/* Only what this key can do (issue 11): a key without write:reports is not told to press a. */}
        <div className="kbd-help" data-testid="kbd-help">
          <kbd>wheel</kbd> <kbd>↑</kbd>
          <kbd>↓</kbd> slices · <kbd>drag</kbd> window · <kbd>shift</kbd>+drag pan · <kbd>ctrl</kbd>+wheel zoom · {presets.map((p) => p.key).join('/')} presets ·{' '}
          <kbd>n</kbd>/<kbd>p</kbd> findings ·{' '}
          {canReview && scan.status !== 'reported' ? (
            <>
              <kbd>a</kbd> accept · <kbd>r</kbd> reject · <kbd>u</kbd> undo ·{' '}
            </>
          ) : null}
          {canAnalyse ? (
            <>
              <kbd>shift</kbd>+<kbd>A</kbd> analyse ·{' '}
            </>
          ) : null}
          <kbd>[</kbd>/<kbd>]</kbd> scans · <kbd>Esc</kbd> worklist · <kbd>i</kbd> invert · <kbd>t</kbd> rotate · <kbd>h</kbd>/<kbd>v</kbd> flip · <kbd>c</kbd> cine · <kbd>l</kbd> layout · <kbd>s</kbd> sync
        </div>
      </aside>
    </section>
  );
}
