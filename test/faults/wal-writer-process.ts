/**
 * A child for wal-kill.test.ts: commits rows into a data folder's database as fast as it can
 * while the WAL checkpointer runs continuously beside it, printing the number of rows committed
 * every ten commits, until it is killed.
 */
import { openDatabase } from '#server/store/sqlite.ts';
import { startWalCheckpointer } from '#server/store/wal-checkpointer.ts';

const dataDir = process.argv[2];
if (!dataDir) throw new Error('usage: wal-writer-process.ts <data folder>');
const db = openDatabase(dataDir);
db.connection.exec('CREATE TABLE IF NOT EXISTS load (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
const already = Number(db.connection.prepare('SELECT COUNT(*) FROM load').pluck().get());
// Small and frequent, so that a kill lands in or between checkpoints of every kind.
await startWalCheckpointer(db, { intervalMs: 1, maxFrames: 64, idleTicks: 1_000_000 });
process.stdout.write('ready\n');
for (let i = 1; ; i += 1) {
  await db.transaction((tx) => tx.run('INSERT INTO load (body) VALUES (?)', [`row ${already + i} ${'x'.repeat(500)}`]));
  if (i % 10 === 0) {
    process.stdout.write(`${already + i}\n`);
    // The checkpointer's timer needs the loop to turn.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
