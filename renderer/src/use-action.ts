/**
 * An admin action: runs it, reloads what it changed, and keeps its error for an inline message
 * (cleared when the next action starts).
 */
import { useState } from 'react';

export function useAction(reload: () => void): { error: unknown; act(work: () => Promise<void>): Promise<void> } {
  const [error, setError] = useState<unknown>(null);
  const act = async (work: () => Promise<void>): Promise<void> => {
    setError(null);
    try {
      await work();
      reload();
    } catch (caught) {
      setError(caught);
    }
  };
  return { error, act };
}
