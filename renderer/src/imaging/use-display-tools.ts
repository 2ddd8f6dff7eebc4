/**
 * The viewer's display state that is not windowing or zoom: invert, rotate and flip (keys i, t,
 * h, v) and cine playback through the stack (key c, frames per second). A hook of its own with
 * its own key listener, so the shared Viewer only wires it in.
 */
import { useCallback, useEffect, useState } from 'react';
import { flipHorizontal, flipVertical, IDENTITY, rotateClockwise, type Orient } from './display-tools.ts';

export const CINE_RATES = [5, 10, 15, 20, 30] as const;
export type CineRate = (typeof CINE_RATES)[number];

export type DisplayTools = {
  orient: Orient;
  invert: boolean;
  playing: boolean;
  fps: CineRate;
  rotate(): void;
  flipH(): void;
  flipV(): void;
  toggleInvert(): void;
  togglePlay(): void;
  setFps(fps: CineRate): void;
  reset(): void;
};

/** Keys other screens' text fields must keep: the same guard as the viewer's own key handler. */
function typingIn(target: EventTarget | null): boolean {
  return target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement || (target instanceof HTMLInputElement && target.type !== 'range' && target.type !== 'checkbox');
}

/**
 * `count` slices; `advance` moves the stack by one, wrapping at the end (a cine loop, as
 * reading workstations play it).
 */
export function useDisplayTools(count: number, advance: () => void): DisplayTools {
  const [orient, setOrient] = useState<Orient>(IDENTITY);
  const [invert, setInvert] = useState(false);
  const [playing, setPlaying] = useState(false);
  const [fps, setFps] = useState<CineRate>(10);

  const rotate = useCallback(() => setOrient(rotateClockwise), []);
  const flipH = useCallback(() => setOrient(flipHorizontal), []);
  const flipV = useCallback(() => setOrient(flipVertical), []);
  const toggleInvert = useCallback(() => setInvert((v) => !v), []);
  const togglePlay = useCallback(() => setPlaying((p) => !p && count > 1), [count]);
  const reset = useCallback(() => {
    setOrient(IDENTITY);
    setInvert(false);
  }, []);

  useEffect(() => {
    if (!playing || count < 2) return;
    // setInterval rather than requestAnimationFrame: the rate is the reader's choice, not the screen's.
    const timer = window.setInterval(advance, 1000 / fps);
    return () => window.clearInterval(timer);
  }, [playing, fps, count, advance]);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (typingIn(event.target) || event.ctrlKey || event.metaKey || event.altKey) return;
      if (event.key === 'i') toggleInvert();
      else if (event.key === 't') rotate();
      else if (event.key === 'h') flipH();
      else if (event.key === 'v') flipV();
      else if (event.key === 'c') togglePlay();
      else return;
      event.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [toggleInvert, rotate, flipH, flipV, togglePlay]);

  return { orient, invert, playing, fps, rotate, flipH, flipV, toggleInvert, togglePlay, setFps, reset };
}
