/** SQL for the processes that run jobs (migration 14). */
import type { Database } from '#server/store/database.ts';

export type NodeRow = { id: number; host: string; pid: number; started_at: string; heartbeat_at: string };

export async function insertNode(db: Database, input: { host: string; pid: number; at: string }): Promise<NodeRow> {
  return (await db.get<NodeRow>('INSERT INTO nodes (host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?) RETURNING *', [
    input.host,
    input.pid,
    input.at,
    input.at,
  ])) as NodeRow;
}

export async function findNode(db: Database, id: number): Promise<NodeRow | undefined> {
  return await db.get<NodeRow>('SELECT * FROM nodes WHERE id = ?', [id]);
}

/** False when the row is gone (pruned as dead while this process was stalled). */
export async function beatNode(db: Database, id: number, at: string): Promise<boolean> {
  return (await db.run('UPDATE nodes SET heartbeat_at = ? WHERE id = ?', [at, id])) === 1;
}

export async function deleteNode(db: Database, id: number): Promise<void> {
  await db.run('DELETE FROM nodes WHERE id = ?', [id]);
}

/** Rows of processes silent since `before`: long dead, their jobs long taken over. */
export async function pruneNodes(db: Database, before: string): Promise<number> {
  return await db.run('DELETE FROM nodes WHERE heartbeat_at < ?', [before]);
}
