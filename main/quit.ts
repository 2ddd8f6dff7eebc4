/**
 * The order of quitting, apart from Electron so it is unit-tested: close the window first (no
 * renderer request may meet a stopping server or a revoked key, which showed the key screen),
 * then stop the embedded server (analyses, in-flight writes, database, and the key revoked
 * last: embedded-server.ts), then let the app quit.
 *
 * Electron emits before-quit again when our own app.quit() runs, and window-all-closed when we
 * close the window ourselves; both must neither start a second stop nor quit half-way.
 */
export type QuitSteps = {
  closeWindows(): void;
  stopServer(): Promise<void>;
  /** app.quit(): runs before-quit again, which then lets it through. */
  quit(): void;
  /** app.exit(code): when stopping failed. */
  exit(code: number): void;
};

export type QuitPhase = 'running' | 'stopping' | 'stopped';

export type QuitSequence = {
  /** For app.on('before-quit'). */
  beforeQuit(event: { preventDefault(): void }): void;
  /** For app.on('window-all-closed'). */
  allWindowsClosed(): void;
  phase(): QuitPhase;
};

export function createQuitSequence(steps: QuitSteps): QuitSequence {
  let phase: QuitPhase = 'running';
  return {
    beforeQuit(event) {
      if (phase === 'stopped') return;
      event.preventDefault();
      if (phase === 'stopping') return;
      phase = 'stopping';
      steps.closeWindows();
      steps.stopServer().then(
        () => {
          phase = 'stopped';
          steps.quit();
        },
        () => {
          phase = 'stopped';
          steps.exit(1);
        },
      );
    },
    allWindowsClosed() {
      // The user closed the last window: quit, which runs the sequence above. Windows we
      // closed while stopping are part of it already.
      if (phase === 'running') steps.quit();
    },
    phase: () => phase,
  };
}
