/**
 * The evaluation page: a 60-slice 512x512 CT-like stack fed to Cornerstone3D the way mia would
 * feed it (frames from GET /v1/instances/{uid}/frames/{n}/raw with X-* headers, through a custom
 * image loader), or, with ?engine=canvas, to mia's own path (renderer/src/imaging/frame.ts on a
 * 2D canvas). The driver (run.ts) bundles it with esbuild, reads window.evalResult and calls
 * window.evalApi. Not part of the app: a measurement harness, see README.md.
 *
 * Plain JavaScript on purpose: @cornerstonejs/* are installed only by the driver, in a temp
 * directory, so the project's typecheck (which covers bench/) could not resolve them.
 */
import * as core from '@cornerstonejs/core';
import * as tools from '@cornerstonejs/tools';
import { parseRawFrame, renderFrame } from '../../renderer/src/imaging/frame.ts';
const params = new URLSearchParams(location.search);
const engine = params.get('engine') ?? 'cs';
const cpu = params.get('cpu') === '1';
const scaleOverlay = params.get('scale') !== '0';
const result = { engine, cpu, errors: [] };
window.evalResult = result;
const t0 = performance.now();

function frameUrl(uid) {
  return `/v1/instances/${uid}/frames/0/raw`;
}

async function fetchFrame(uid) {
  const response = await fetch(frameUrl(uid));
  if (!response.ok)
    throw new Error(`frame ${uid}: ${response.status}`);
  return parseRawFrame(await response.arrayBuffer(), response.headers);
}

/** Waits for `n` animation frames and reports their mean interval (ms). */
function rafIntervals(n) {
  return new Promise((resolve) => {
    let last = 0;
    let count = 0;
    let sum = 0;
    const tick = (now) => {
      if (last > 0) {
        sum += now - last;
        count += 1;
      }
      last = now;
      if (count < n)
        requestAnimationFrame(tick);
      else
        resolve(sum / count);
    };
    requestAnimationFrame(tick);
  });
}

/**
 * Scrolls through every slice as fast as the viewer draws: each step asks for the next slice as
 * soon as the previous one is reported drawn (by the draw itself, not by polling on the next
 * animation frame, which would add a frame to every step).
 */
async function scrollPass(total, show, drawnSignal) {
  const start = performance.now();
  for (let i = 1; i < total; i += 1) {
    const drawn = drawnSignal.wait(i);
    show(i);
    await drawn;
  }
  const ms = performance.now() - start;
  return { fps: ((total - 1) / ms) * 1000, ms };
}

/** Resolves wait(i) when notify(i) is called (slice i is on screen). */
function drawnSignal() {
  let pending = null;
  return {
    wait: (i) => new Promise((resolve) => { pending = { i, resolve }; }),
    notify: (i) => {
      if (pending && pending.i === i) {
        const { resolve } = pending;
        pending = null;
        resolve();
      }
    },
  };
}

// ---------------------------------------------------------------- mia's 2D canvas path

async function runCanvas(info) {
  const element = document.getElementById('vp1');
  const canvas = document.createElement('canvas');
  canvas.width = element.clientWidth;
  canvas.height = element.clientHeight;
  element.append(canvas);
  const ctx = canvas.getContext('2d');
  if (!ctx)
    throw new Error('no 2d context');
  const frames = new Map();
  const off = document.createElement('canvas');
  off.width = info.columns;
  off.height = info.rows;
  const offCtx = off.getContext('2d');
  if (!offCtx)
    throw new Error('no 2d context');
  const image = offCtx.createImageData(info.columns, info.rows);
  let drawn = -1;
  const signal = drawnSignal();
  const draw = (i) => {
    const frame = frames.get(i);
    if (!frame)
      return;
    renderFrame(frame, frame.defaultWindow ?? { center: 40, width: 80 }, image.data);
    offCtx.putImageData(image, 0, 0);
    // Physical aspect: height scaled by row spacing / column spacing (common/pixel-aspect.ts).
    const aspect = info.spacing[0] / info.spacing[1];
    const scale = Math.min(canvas.width / info.columns, canvas.height / (info.rows * aspect));
    const w = info.columns * scale;
    const h = info.rows * aspect * scale;
    ctx.fillStyle = '#000';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(off, (canvas.width - w) / 2, (canvas.height - h) / 2, w, h);
    drawn = i;
    signal.notify(i);
  };
  const show = (i) => {
    if (frames.has(i))
      requestAnimationFrame(() => draw(i));
    else
      void fetchFrame(info.uids[i] ?? '').then((f) => { frames.set(i, f); requestAnimationFrame(() => draw(i)); });
  };
  show(0);
  await new Promise((resolve) => { const c = () => (drawn === 0 ? resolve() : requestAnimationFrame(c)); c(); });
  result.firstImageMs = performance.now() - t0;
  result.scrollFirstPass = await scrollPass(info.uids.length, show, signal);
  show(0);
  await new Promise((resolve) => { const c = () => (drawn === 0 ? resolve() : requestAnimationFrame(c)); c(); });
  result.scrollCached = await scrollPass(info.uids.length, show, signal);
  result.idleRafMs = await rafIntervals(30);
  result.done = true;
}

// ---------------------------------------------------------------- Cornerstone3D

const SCHEME = 'mia';

function registerMetadata(info) {
  const index = new Map(info.uids.map((uid, i) => [`${SCHEME}:${frameUrl(uid)}`, i]));
  core.metaData.addProvider((type, imageId) => {
    const i = index.get(imageId);
    if (i === undefined)
      return undefined;
    const [rowSpacing, columnSpacing] = info.spacing;
    switch (type) {
      case 'imagePlaneModule':
        return {
          frameOfReferenceUID: '1.2.826.0.1.3680043.8.498.1',
          rows: info.rows,
          columns: info.columns,
          imageOrientationPatient: [1, 0, 0, 0, 1, 0],
          rowCosines: [1, 0, 0],
          columnCosines: [0, 1, 0],
          imagePositionPatient: [-(info.columns * columnSpacing) / 2, -(info.rows * rowSpacing) / 2, i * info.sliceGap],
          sliceThickness: info.sliceGap,
          sliceLocation: i * info.sliceGap,
          pixelSpacing: [rowSpacing, columnSpacing],
          rowPixelSpacing: rowSpacing,
          columnPixelSpacing: columnSpacing,
        };
      case 'imagePixelModule':
        return { bitsAllocated: 16, bitsStored: 16, highBit: 15, photometricInterpretation: 'MONOCHROME2', pixelRepresentation: 1, samplesPerPixel: 1 };
      case 'generalSeriesModule':
        return { modality: 'CT', seriesInstanceUID: '1.2.826.0.1.3680043.8.498.2', seriesNumber: 1 };
      case 'generalImageModule':
        return { instanceNumber: i + 1 };
      case 'modalityLutModule':
        return { rescaleSlope: 1, rescaleIntercept: 0 };
      case 'voiLutModule':
        return { windowCenter: [40], windowWidth: [80] };
      default:
        return undefined;
    }
  }, 10000);
}

/**
 * The loader mia would need: the server has decoded the frame but not rescaled it - it sends
 * stored values plus slope/intercept - so parseRawFrame gives modality values (HU) and the image
 * is handed to Cornerstone as already scaled (Int16 when the values fit, else Float32).
 */
function miaImageLoader(imageId) {
  const url = imageId.slice(SCHEME.length + 1);
  const promise = (async () => {
    const started = performance.now();
    const response = await fetch(url);
    const frame = parseRawFrame(await response.arrayBuffer(), response.headers);
    const integral = frame.values.every((v) => Number.isInteger(v)) && frame.min >= -32768 && frame.max <= 32767;
    const pixels = integral ? Int16Array.from(frame.values) : Float32Array.from(frame.values);
    const plane = core.metaData.get('imagePlaneModule', imageId);
    const voxelManager = core.utilities.VoxelManager.createImageVoxelManager({ width: frame.columns, height: frame.rows, scalarData: pixels, numberOfComponents: 1 });
    const image = {
      imageId,
      dataType: pixels.constructor.name,
      color: false,
      rgba: false,
      numberOfComponents: 1,
      rows: frame.rows,
      columns: frame.columns,
      height: frame.rows,
      width: frame.columns,
      rowPixelSpacing: plane.rowPixelSpacing,
      columnPixelSpacing: plane.columnPixelSpacing,
      slope: 1,
      intercept: 0,
      preScale: { enabled: true, scaled: true, scalingParameters: { modality: 'CT', rescaleSlope: 1, rescaleIntercept: 0 } },
      windowCenter: frame.defaultWindow?.center ?? 40,
      windowWidth: frame.defaultWindow?.width ?? 80,
      voiLUTFunction: core.Enums.VOILUTFunctionType.LINEAR,
      minPixelValue: frame.min,
      maxPixelValue: frame.max,
      invert: frame.photometric === 'MONOCHROME1',
      sizeInBytes: pixels.byteLength,
      getPixelData: () => pixels,
      getCanvas: () => { throw new Error('grey image has no canvas'); },
      voxelManager,
      loadTimeInMS: performance.now() - started,
    };
    return image;
  })();
  return { promise };
}

async function runCornerstone(info) {
  const initStart = performance.now();
  core.init();
  if (cpu)
    core.setUseCPURendering(true);
  tools.init();
  result.initMs = performance.now() - initStart;
  result.capabilities = core.getRenderingCapabilities();
  result.effectiveBackend = core.getEffectiveRenderBackend();
  result.shouldUseCPU = core.getShouldUseCPURendering();
  core.registerImageLoader(SCHEME, miaImageLoader);
  registerMetadata(info);
  const engineId = 'engine';
  const renderingEngine = new core.RenderingEngine(engineId);
  const el1 = document.getElementById('vp1');
  const el2 = document.getElementById('vp2');
  renderingEngine.setViewports([
    { viewportId: 'vp1', type: core.Enums.ViewportType.STACK, element: el1, defaultOptions: { background: [0, 0, 0] } },
    { viewportId: 'vp2', type: core.Enums.ViewportType.STACK, element: el2, defaultOptions: { background: [0, 0, 0] } },
  ]);
  const vp1 = renderingEngine.getViewport('vp1');
  const vp2 = renderingEngine.getViewport('vp2');
  result.viewportClass = vp1.constructor.name;
  result.vp1UsesCPU = vp1.useCPURendering ?? null;
  const imageIds = info.uids.map((uid) => `${SCHEME}:${frameUrl(uid)}`);
  let rendered1 = -1;
  const signal = drawnSignal();
  el1.addEventListener(core.Enums.Events.IMAGE_RENDERED, () => {
    rendered1 = vp1.getCurrentImageIdIndex();
    signal.notify(rendered1);
  });
  const first = new Promise((resolve) => el1.addEventListener(core.Enums.Events.IMAGE_RENDERED, () => resolve(), { once: true }));
  await vp1.setStack(imageIds, 0);
  vp1.render();
  await first;
  result.firstImageMs = performance.now() - t0;
  // Tools mia has, as Cornerstone offers them.
  const { ToolGroupManager, Enums: ToolEnums } = tools;
  for (const Tool of [tools.WindowLevelTool, tools.PanTool, tools.ZoomTool, tools.StackScrollTool, tools.LengthTool, tools.EllipticalROITool, tools.RectangleROITool, tools.ProbeTool, tools.ScaleOverlayTool])
    tools.addTool(Tool);
  const group = ToolGroupManager.createToolGroup('group');
  if (!group)
    throw new Error('no tool group');
  for (const name of [tools.WindowLevelTool, tools.PanTool, tools.ZoomTool, tools.StackScrollTool, tools.LengthTool, tools.EllipticalROITool, tools.RectangleROITool, tools.ProbeTool, tools.ScaleOverlayTool].map((t) => t.toolName))
    group.addTool(name);
  group.addViewport('vp1', engineId);
  group.addViewport('vp2', engineId);
  group.setToolActive(tools.StackScrollTool.toolName, { bindings: [{ mouseButton: ToolEnums.MouseBindings.Wheel }] });
  if (scaleOverlay)
    group.setToolEnabled(tools.ScaleOverlayTool.toolName);
  // Scrolling: first pass while frames load, then from cache.
  result.scrollFirstPass = await scrollPass(imageIds.length, (i) => void vp1.setImageIdIndex(i), signal);
  await vp1.setImageIdIndex(0);
  await new Promise((r) => setTimeout(r, 100));
  result.scrollCached = await scrollPass(imageIds.length, (i) => void vp1.setImageIdIndex(i), signal);
  result.idleRafMs = await rafIntervals(30);
  // Second viewport, kept on the same position by Cornerstone's image-slice synchronizer.
  await vp2.setStack(imageIds, 0);
  vp2.render();
  const sync = tools.synchronizers.createImageSliceSynchronizer('slices');
  sync.add({ renderingEngineId: engineId, viewportId: 'vp1' });
  sync.add({ renderingEngineId: engineId, viewportId: 'vp2' });
  await vp1.setImageIdIndex(30);
  vp1.render();
  await new Promise((r) => setTimeout(r, 500));
  result.syncVp2IndexAfterVp1To30 = vp2.getCurrentImageIdIndex();
  const api = {
    /** Client (page) coordinates of an image pixel in vp1. */
    toClient(x, y) {
      // Pixel indices to patient coordinates by hand: core.utilities.imageToWorldCoords (5.14.0)
      // multiplies x by rowPixelSpacing, which its own loaders set to PixelSpacing[0] (the
      // spacing between rows), so it lands wrong on non-square pixels; the rendering and the
      // measurement tools do not use it.
      const [rowSp, colSp] = info.spacing;
      const origin = [-(info.columns * colSp) / 2, -(info.rows * rowSp) / 2, vp1.getCurrentImageIdIndex() * info.sliceGap];
      const world = [(origin[0] ?? 0) + x * colSp, (origin[1] ?? 0) + y * rowSp, origin[2] ?? 0];
      const [cx, cy] = vp1.worldToCanvas(world);
      const rect = el1.getBoundingClientRect();
      return [rect.left + cx, rect.top + cy];
    },
    activate(name) {
      for (const n of ['Length', 'EllipticalROI', 'RectangleROI', 'Probe', 'WindowLevel', 'Pan', 'Zoom'])
        if (n !== name)
          group.setToolPassive(n);
      group.setToolActive(name, { bindings: [{ mouseButton: ToolEnums.MouseBindings.Primary }] });
    },
    annotations() {
      return tools.annotation.state.getAllAnnotations().map((a) => ({ tool: a.metadata.toolName, stats: a.data.cachedStats }));
    },
    display() {
      const props = vp1.getProperties();
      return { voi: props.voiRange, invert: props.invert, camera: vp1.getCamera().parallelScale, presentation: vp1.getViewPresentation() };
    },
    transform() {
      vp1.setProperties({ invert: true });
      vp1.setViewPresentation({ rotation: 90, flipHorizontal: true });
      vp1.render();
    },
    async cine(fps, ms) {
      await vp1.setImageIdIndex(0);
      const seen = new Set();
      const onRender = () => seen.add(vp1.getCurrentImageIdIndex());
      el1.addEventListener(core.Enums.Events.IMAGE_RENDERED, onRender);
      tools.utilities.cine.playClip(el1, { framesPerSecond: fps, loop: true });
      await new Promise((r) => setTimeout(r, ms));
      tools.utilities.cine.stopClip(el1);
      el1.removeEventListener(core.Enums.Events.IMAGE_RENDERED, onRender);
      return seen.size;
    },
    rendered: () => rendered1,
    /** Drawn measurement labels in vp1's SVG layer: are the annotations shown, not only computed? */
    svgTexts: () => el1.querySelectorAll('svg text').length,
  };
  window.evalApi = api;
  await vp1.setImageIdIndex(30);
  vp1.render();
  result.done = true;
}

async function main() {
  const info = (await (await fetch('/series.json')).json());
  if (engine === 'canvas')
    await runCanvas(info);
  else
    await runCornerstone(info);
}

window.addEventListener('error', (e) => result.errors.push(`${String(e.message)} ${e.error instanceof Error ? (e.error.stack ?? '').slice(0, 600) : ''}`));

window.addEventListener('unhandledrejection', (e) => result.errors.push(String(e.reason)));

main().catch((error) => {
  result.errors.push(error instanceof Error ? `${error.message}\n${error.stack ?? ''}` : String(error));
  result.done = true;
});
