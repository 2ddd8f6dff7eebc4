/**
 * PostgreSQL's LISTEN/NOTIFY, for news every node of a hub must hear at once (job progress). One
 * client of the pool is held for listening; notifications go out through any other.
 */
import type { PostgresDatabase } from '#server/store/postgres.ts';

/** Channel names are identifiers, never values: they are constants of the code. */
const CHANNEL = /^[a-z_][a-z0-9_]*$/;

export async function listen(db: PostgresDatabase, channel: string, onMessage: (payload: string) => void): Promise<() => Promise<void>> {
  if (!CHANNEL.test(channel)) throw new Error(`bad channel name ${channel}`);
  const client = await db.pool.connect();
  const handler = (message: { channel: string; payload?: string | undefined }): void => {
    if (message.channel === channel && message.payload !== undefined) onMessage(message.payload);
  };
  client.on('notification', handler);
  // A lost connection must not crash the process; the poll behind every follower still works.
  client.on('error', () => undefined);
  await client.query(`LISTEN ${channel}`);
  return async () => {
    client.off('notification', handler);
    await client.query(`UNLISTEN ${channel}`).catch(() => undefined);
    client.release();
  };
}

/** PostgreSQL caps a payload at 8,000 bytes; ours are a few dozen. */
export async function notify(db: PostgresDatabase, channel: string, payload: string): Promise<void> {
  await db.run('SELECT pg_notify(?, ?)', [channel, payload]);
}
