/**
 * The viewer's layout buttons (1x1, 1x2, 2x2; key l cycles them) and the sync toggle (key s):
 * linked panes scroll together by patient position (use-pane-sync.ts).
 */
import { LAYOUTS, type Layout } from '../imaging/layout.ts';

export function LayoutControls({ layout, onLayout, sync, onSync }: { layout: Layout; onLayout(layout: Layout): void; sync: boolean; onSync(): void }) {
  return (
    <>
      {LAYOUTS.map((l) => (
        <button key={l} type="button" onClick={() => onLayout(l)} className={layout === l ? 'primary' : ''} data-testid={`layout-${l}`} title={`Layout ${l} (l cycles)`} aria-pressed={layout === l}>
          {l}
        </button>
      ))}
      {layout !== '1x1' ? (
        <button
          type="button"
          onClick={onSync}
          className={sync ? 'primary' : ''}
          data-testid="sync-toggle"
          aria-pressed={sync}
          title="Synchronized scrolling by position (s): same-study panes by absolute position; a linked prior keeps the offset it had when linked"
        >
          Sync {sync ? 'on' : 'off'}
        </button>
      ) : null}
    </>
  );
}
