/**
 * The viewer's panes and their synchronized scrolling (issue 11, study-level reading): which
 * series each comparison pane shows, the slice it is on, whether it is linked to the primary
 * pane, and the propagation of a scroll in any pane to the linked others by position
 * (sync.ts). The primary pane (pane 1: the scan the viewer was opened on) owns its own slice;
 * this hook follows it and moves it when a linked comparison pane scrolls.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import type { Scan } from '../api/types.ts';
import { slicePositionMm } from './display-tools.ts';
import { autoFill, paneCount, type Layout } from './layout.ts';
import { sliceOrientation, type Slice } from './stack.ts';
import { followReference, linkPanes, nearestSlice, referenceOf, sliceNormal, type Link, type StackGeometry } from './sync.ts';

/** A comparison pane (panes 2-4). `linked`: the reader's choice; the link itself needs sync on too. */
export type ComparePane = { scan: Scan | null; index: number | null; linked: boolean; link: Link | null };

/** Layout survives moving to another scan ([ / ], a thumbnail on pane 1): a reader keeps a hanging. */
let keptLayout: Layout = '1x1';

const EMPTY: ComparePane = { scan: null, index: null, linked: false, link: null };

export function geometryOf(slices: readonly Slice[], studyUid: string): StackGeometry {
  const middle = slices[Math.floor(slices.length / 2)];
  return { normal: sliceNormal(sliceOrientation(middle ?? null)), positions: slices.map((s) => slicePositionMm(s)), studyUid };
}

export type PaneSync = {
  layout: Layout;
  setLayout(layout: Layout): void;
  /** Panes 2-4 of the layout (index 0 here is pane 2). */
  panes: readonly ComparePane[];
  sync: boolean;
  toggleSync(): void;
  /** 1-based pane the keys act on. */
  active: number;
  setActive(pane: number): void;
  show(pane: number, scan: Scan): void;
  toggleLink(pane: number): void;
  /** A comparison pane loaded its series. */
  setSlices(pane: number, slices: readonly Slice[]): void;
  /** The reader scrolled comparison pane `pane` to `index`. */
  scroll(pane: number, index: number): void;
  /** Keys on an active comparison pane: `delta` slices, clamped to its stack. */
  step(pane: number, delta: number): void;
};

/**
 * `primary`: the scan of pane 1, its slices and slice index with its setter; `patientScans`
 * the patient's series (the series strip's list), for filling empty panes. Same-study panes
 * are linked by default (one frame of reference: absolute positions); priors are not, until the
 * reader aligns them by eye and links them (the offset of that moment is kept).
 */
export function usePaneSync(
  primary: Scan,
  patientScans: readonly Scan[] | null,
  slices: readonly Slice[],
  index: number,
  setIndex: (index: number) => void,
): PaneSync {
  const [layout, setLayoutState] = useState<Layout>(keptLayout);
  const [panes, setPanes] = useState<ComparePane[]>([EMPTY, EMPTY, EMPTY]);
  const [sync, setSync] = useState(true);
  const [active, setActive] = useState(1);
  const geometries = useRef(new Map<number, StackGeometry>());
  const primaryGeometry = useMemo(() => geometryOf(slices, primary.study_uid), [slices, primary.study_uid]);
  /** The primary index a comparison pane's scroll just set: the primary's own effect skips it. */
  const drivenTo = useRef<number | null>(null);
  const indexRef = useRef(index);
  indexRef.current = index;
  const panesRef = useRef(panes);
  panesRef.current = panes;

  const setLayout = useCallback((next: Layout) => {
    keptLayout = next;
    setLayoutState(next);
    setActive((a) => (a > paneCount(next) ? 1 : a));
  }, []);

  /** Links pane k (0-based among comparison panes) as things stand now, and aligns it when absolute. */
  const relink = useCallback(
    (pane: ComparePane, k: number, syncOn: boolean): ComparePane => {
      const geometry = geometries.current.get(k);
      if (!syncOn || !pane.linked || !geometry || !pane.scan) return { ...pane, link: null };
      const link = linkPanes(primaryGeometry, indexRef.current, geometry, pane.index ?? 0);
      const position = primaryGeometry.positions[indexRef.current];
      const follow = link.mode === 'absolute' && position !== null && position !== undefined ? followReference(link, geometry, position) : null;
      return { ...pane, link, index: follow ?? pane.index };
    },
    [primaryGeometry],
  );

  const show = useCallback((pane: number, scan: Scan) => {
    const k = pane - 2;
    if (k < 0 || k > 2) return;
    geometries.current.delete(k);
    // Same study: one frame of reference, linked by default. A prior waits for the reader.
    setPanes((list) => list.map((p, i) => (i === k ? { scan, index: null, linked: scan.study_uid === primary.study_uid, link: null } : p)));
  }, [primary]);

  const setSlices = useCallback(
    (pane: number, paneSlices: readonly Slice[]) => {
      const k = pane - 2;
      const current = panesRef.current[k];
      if (!current?.scan) return;
      geometries.current.set(k, geometryOf(paneSlices, current.scan.study_uid));
      setPanes((list) =>
        list.map((p, i) => {
          if (i !== k) return p;
          const start = p.index ?? Math.floor(paneSlices.length / 2);
          return relink({ ...p, index: start }, k, sync);
        }),
      );
    },
    [relink, sync],
  );

  const toggleLink = useCallback(
    (pane: number) => {
      const k = pane - 2;
      setPanes((list) => list.map((p, i) => (i === k ? relink({ ...p, linked: !p.linked }, k, sync) : p)));
    },
    [relink, sync],
  );

  const toggleSync = useCallback(() => {
    const next = !sync;
    setSync(next);
    // Switched on: links (and a prior's offset) are taken as the panes stand now.
    setPanes((list) => list.map((p, k) => relink(p, k, next)));
  }, [relink, sync]);

  // A layout opens (or the patient's series arrive): empty panes get series a reader compares.
  useEffect(() => {
    if (!patientScans) return;
    const count = paneCount(layout) - 1;
    const list = panesRef.current;
    const empty = list.slice(0, count).flatMap((p, k) => (p.scan ? [] : [k]));
    if (empty.length === 0) return;
    const taken = list.flatMap((p) => (p.scan ? [p.scan.scan_id] : []));
    const chosen = autoFill(primary, patientScans, taken, empty.length);
    chosen.forEach((scan, j) => show((empty[j] ?? 0) + 2, scan));
  }, [layout, patientScans, primary, show]);

  // Pane 1 moved (wheel, keys, cine, a finding): linked panes follow its position.
  useEffect(() => {
    if (drivenTo.current === index) {
      drivenTo.current = null;
      return;
    }
    const position = primaryGeometry.positions[index];
    // Nothing linked (1x1, sync off): no state update at all on a scroll step.
    if (position === null || position === undefined || !panesRef.current.some((p) => p.link && p.link.mode !== 'none')) return;
    setPanes((list) => {
      let changed = false;
      const next = list.map((p, k) => {
        const geometry = geometries.current.get(k);
        if (!p.link || !geometry) return p;
        const at = followReference(p.link, geometry, position);
        if (at === null || at === p.index) return p;
        changed = true;
        return { ...p, index: at };
      });
      return changed ? next : list;
    });
  }, [index, primaryGeometry]);

  const scroll = useCallback(
    (pane: number, to: number) => {
      const k = pane - 2;
      const source = panesRef.current[k];
      const geometry = geometries.current.get(k);
      const reference = source?.link && geometry ? referenceOf(source.link, geometry, to) : null;
      setPanes((list) =>
        list.map((p, i) => {
          if (i === k) return { ...p, index: to };
          const g = geometries.current.get(i);
          if (reference === null || !p.link || !g) return p;
          return { ...p, index: followReference(p.link, g, reference) ?? p.index };
        }),
      );
      if (reference === null) return;
      const primaryAt = nearestSlice(primaryGeometry.positions, reference);
      if (primaryAt >= 0 && primaryAt !== indexRef.current) {
        drivenTo.current = primaryAt;
        setIndex(primaryAt);
      }
    },
    [primaryGeometry, setIndex],
  );

  const step = useCallback(
    (pane: number, delta: number) => {
      const count = geometries.current.get(pane - 2)?.positions.length ?? 0;
      const current = panesRef.current[pane - 2]?.index;
      if (count === 0 || current === null || current === undefined) return;
      scroll(pane, Math.max(0, Math.min(count - 1, current + delta)));
    },
    [scroll],
  );

  const shown = useMemo(() => panes.slice(0, paneCount(layout) - 1), [panes, layout]);
  return { layout, setLayout, panes: shown, sync, toggleSync, active, setActive, show, toggleLink, setSlices, scroll, step };
}
