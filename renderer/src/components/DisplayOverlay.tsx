/**
 * What the viewer draws over the image besides the corner text: patient directions at the four
 * edges (from Image Orientation (Patient), turned and mirrored with the image) and a scale bar
 * of a round length in mm from the pixel spacing. And the display tools' controls: invert,
 * rotate, flip and cine playback.
 */
import { useState, type ReactNode } from 'react';
import { CINE_RATES, type DisplayTools } from '../imaging/use-display-tools.ts';
import { TagBrowser } from './TagBrowser.tsx';
import type { EdgeMarkers } from '../imaging/display-tools.ts';

export function DisplayOverlay({ markers, bar }: { markers: EdgeMarkers | null; bar: { pixels: number; label: string } | null }) {
  return (
    <>
      {markers ? (
        <>
          <div className="overlay-text orient orient-left" data-testid="orient-left">{markers.left}</div>
          <div className="overlay-text orient orient-right" data-testid="orient-right">{markers.right}</div>
          <div className="overlay-text orient orient-top" data-testid="orient-top">{markers.top}</div>
          <div className="overlay-text orient orient-bottom" data-testid="orient-bottom">{markers.bottom}</div>
        </>
      ) : null}
      {bar ? (
        <div className="overlay-text scale-bar" data-testid="scale-bar" data-mm-label={bar.label}>
          <div className="scale-bar-line" data-testid="scale-bar-line" style={{ width: `${bar.pixels}px` }} />
          <span>{bar.label}</span>
        </div>
      ) : null}
    </>
  );
}

/** `children`: controls of the viewer's own placed first in the row (the layout and sync buttons). */
export function DisplayControls({ tools, slices, instanceUid, children }: { tools: DisplayTools; slices: number; instanceUid: string | null; children?: ReactNode }) {
  const [tagsOpen, setTagsOpen] = useState(false);
  return (
    <div className="display-tools" data-testid="display-tools">
      {children}
      {tagsOpen && instanceUid ? <TagBrowser instanceUid={instanceUid} onClose={() => setTagsOpen(false)} /> : null}
      <button type="button" onClick={tools.togglePlay} disabled={slices < 2} data-testid="cine-play" title="Cine: play or pause the stack (c)" className={tools.playing ? 'primary' : ''}>
        {tools.playing ? '❚❚ Pause' : '▶ Cine'}
      </button>
      <label className="muted">
        <select value={tools.fps} onChange={(e) => tools.setFps(CINE_RATES.find((rate) => rate === Number(e.target.value)) ?? 10)} data-testid="cine-fps" aria-label="Cine frames per second">
          {CINE_RATES.map((rate) => (
            <option key={rate} value={rate}>
              {rate} fps
            </option>
          ))}
        </select>
      </label>
      <span className="spacer" />
      <button type="button" onClick={tools.toggleInvert} data-testid="invert" title="Invert grey scale (i)" className={tools.invert ? 'primary' : ''}>
        Invert
      </button>
      <button type="button" onClick={tools.rotate} data-testid="rotate" title="Rotate 90° clockwise (t)">
        Rotate
      </button>
      <button type="button" onClick={tools.flipH} data-testid="flip-h" title="Flip left-right (h)">
        Flip H
      </button>
      <button type="button" onClick={tools.flipV} data-testid="flip-v" title="Flip top-bottom (v)">
        Flip V
      </button>
      <button type="button" onClick={() => setTagsOpen((open) => !open)} disabled={!instanceUid} data-testid="open-tags" title="DICOM tags of the image shown">
        Tags
      </button>
    </div>
  );
}
