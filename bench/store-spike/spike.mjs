// Evidence for issue 12's store choice: the same reads and writes through better-sqlite3 as mia
// does today, Kysely over better-sqlite3, raw pg and Kysely over pg (PostgreSQL 15), in
// interleaved rounds on one machine. Plain JavaScript, outside the project's typecheck: Kysely
// and pg are not project dependencies yet. Run (as root, Debian's postgresql installed):
//   npm install --prefix /tmp/storespike kysely@0.27 pg@8
//   STORE_SPIKE_DEPS=/tmp/storespike node bench/store-spike/spike.mjs
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const project = createRequire(join(import.meta.dirname, '..', '..', 'package.json'));
const deps = createRequire(join(process.env.STORE_SPIKE_DEPS ?? '/tmp/storespike', 'package.json'));
const Sqlite = project('better-sqlite3');
const { Kysely, SqliteDialect, PostgresDialect, sql } = deps('kysely');
const pg = deps('pg');

const SCANS = 2000;
const FINDINGS_PER_SCAN = 3;
const PAGE = 500;
const ROUNDS = 5;
const PG_BIN = '/usr/lib/postgresql/15/bin';

function startPostgres() {
  const dir = mkdtempSync(join(tmpdir(), 'mia-pg-'));
  chownSync(dir, 101, 104);
  const port = 54000 + Math.floor(Math.random() * 1000);
  const run = (...args) => execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });
  run(`${PG_BIN}/initdb`, '-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres');
  run(`${PG_BIN}/pg_ctl`, '-D', join(dir, 'data'), '-w', '-l', join(dir, 'log'), '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, 'start');
  return {
    port,
    stop() {
      spawnSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/pg_ctl`, '-D', join(dir, 'data'), '-m', 'fast', 'stop'], { stdio: 'ignore' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const SCHEMA = [
  `CREATE TABLE scans (id INTEGER PRIMARY KEY, scan_id TEXT UNIQUE NOT NULL, patient_id TEXT NOT NULL, status TEXT NOT NULL, latest_analysis_ref INTEGER)`,
  `CREATE TABLE findings (id INTEGER PRIMARY KEY, analysis_ref INTEGER NOT NULL, label TEXT NOT NULL, confidence REAL NOT NULL, x INTEGER, y INTEGER, width INTEGER, height INTEGER)`,
  `CREATE INDEX findings_analysis ON findings (analysis_ref)`,
  `CREATE TABLE instances (id INTEGER PRIMARY KEY, sop_instance_uid TEXT UNIQUE NOT NULL, scan_ref INTEGER NOT NULL, file_path TEXT NOT NULL, sha256 TEXT NOT NULL, rows INTEGER, columns INTEGER)`,
];

function seedRows() {
  const scans = [];
  const findings = [];
  for (let i = 1; i <= SCANS; i++) {
    scans.push([i, `1.2.826.0.1.${i}`, `PAT-${i % 300}`, 'analyzed', i]);
    for (let k = 0; k < FINDINGS_PER_SCAN; k++) findings.push([i * 10 + k, i, 'tumor_detected', 0.5 + k / 10, 10, 20, 30, 40]);
  }
  return { scans, findings };
}

let nextInstance = 1;
const instanceBatch = () =>
  Array.from({ length: 100 }, () => {
    const n = nextInstance++;
    return { id: n, sop_instance_uid: `1.2.3.${n}`, scan_ref: 1, file_path: `archive/${n}.dcm`, sha256: 'ab'.repeat(32), rows: 512, columns: 512 };
  });

function sqliteDirect(file) {
  const db = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  const page = db.prepare('SELECT * FROM scans WHERE id > ? ORDER BY id LIMIT ?');
  const byScan = db.prepare('SELECT * FROM scans WHERE scan_id = ?');
  const insert = db.prepare('INSERT INTO instances (id, sop_instance_uid, scan_ref, file_path, sha256, rows, columns) VALUES (@id, @sop_instance_uid, @scan_ref, @file_path, @sha256, @rows, @columns)');
  const batch = db.transaction((rows) => rows.forEach((r) => insert.run(r)));
  return {
    name: 'better-sqlite3 direct (today)',
    async page() {
      const scans = page.all(0, PAGE);
      const refs = scans.map((s) => s.latest_analysis_ref);
      return db.prepare(`SELECT * FROM findings WHERE analysis_ref IN (SELECT value FROM json_each(?)) ORDER BY analysis_ref, confidence DESC`).all(JSON.stringify(refs)).length;
    },
    async one(id) {
      return byScan.get(id);
    },
    async write() {
      batch(instanceBatch());
    },
    close: () => db.close(),
  };
}

function kyselyOn(dialect, name, json) {
  const db = new Kysely({ dialect });
  return {
    name,
    async page() {
      const scans = await db.selectFrom('scans').selectAll().where('id', '>', 0).orderBy('id').limit(PAGE).execute();
      const refs = scans.map((s) => s.latest_analysis_ref);
      return (await db.selectFrom('findings').selectAll().where('analysis_ref', 'in', refs).orderBy('analysis_ref').orderBy('confidence', 'desc').execute()).length;
    },
    async one(id) {
      return db.selectFrom('scans').selectAll().where('scan_id', '=', id).executeTakeFirst();
    },
    async write() {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('instances').values(instanceBatch()).execute();
      });
    },
    close: () => db.destroy(),
    json,
  };
}

function pgRaw(pool) {
  return {
    name: 'pg raw (PostgreSQL 15)',
    async page() {
      const scans = (await pool.query({ name: 'page', text: 'SELECT * FROM scans WHERE id > $1 ORDER BY id LIMIT $2', values: [0, PAGE] })).rows;
      const refs = scans.map((s) => s.latest_analysis_ref);
      return (await pool.query({ name: 'findings', text: 'SELECT * FROM findings WHERE analysis_ref = ANY($1) ORDER BY analysis_ref, confidence DESC', values: [refs] })).rows.length;
    },
    async one(id) {
      return (await pool.query({ name: 'one', text: 'SELECT * FROM scans WHERE scan_id = $1', values: [id] })).rows[0];
    },
    async write() {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const rows = instanceBatch();
        const values = [];
        const tuples = rows.map((r, i) => {
          values.push(r.id, r.sop_instance_uid, r.scan_ref, r.file_path, r.sha256, r.rows, r.columns);
          return `($${i * 7 + 1}, $${i * 7 + 2}, $${i * 7 + 3}, $${i * 7 + 4}, $${i * 7 + 5}, $${i * 7 + 6}, $${i * 7 + 7})`;
        });
        await client.query(`INSERT INTO instances (id, sop_instance_uid, scan_ref, file_path, sha256, rows, columns) VALUES ${tuples.join(', ')}`, values);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    },
    close: () => undefined,
  };
}

async function timeOps(fn, count) {
  const samples = [];
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    samples.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

const dir = mkdtempSync(join(tmpdir(), 'mia-store-spike-'));
const server = startPostgres();
try {
  const { scans, findings } = seedRows();
  // SQLite files, one per SQLite backend, same rows.
  const sqliteFile = (name) => {
    const file = join(dir, `${name}.sqlite`);
    const db = new Sqlite(file);
    db.pragma('journal_mode = WAL');
    for (const s of SCHEMA) db.exec(s);
    const is = db.prepare('INSERT INTO scans VALUES (?, ?, ?, ?, ?)');
    const fi = db.prepare('INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    db.transaction(() => {
      scans.forEach((r) => is.run(...r));
      findings.forEach((r) => fi.run(...r));
    })();
    db.close();
    return file;
  };
  const pool = new pg.Pool({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres', max: 4 });
  for (const s of SCHEMA) await pool.query(s.replace('INTEGER PRIMARY KEY', 'BIGINT PRIMARY KEY').replace('REAL', 'DOUBLE PRECISION'));
  for (let i = 0; i < scans.length; i += 500) {
    const chunk = scans.slice(i, i + 500);
    await pool.query(`INSERT INTO scans VALUES ${chunk.map((_, k) => `($${k * 5 + 1}, $${k * 5 + 2}, $${k * 5 + 3}, $${k * 5 + 4}, $${k * 5 + 5})`).join(', ')}`, chunk.flat());
  }
  for (let i = 0; i < findings.length; i += 500) {
    const chunk = findings.slice(i, i + 500);
    await pool.query(`INSERT INTO findings VALUES ${chunk.map((_, k) => `(${Array.from({ length: 8 }, (_, j) => `$${k * 8 + j + 1}`).join(', ')})`).join(', ')}`, chunk.flat());
  }
  await pool.query('ANALYZE');

  const direct = sqliteDirect(sqliteFile('direct'));
  const kyFile = new Sqlite(sqliteFile('kysely'));
  kyFile.pragma('journal_mode = WAL');
  kyFile.pragma('synchronous = FULL');
  const backends = [
    direct,
    kyselyOn(new SqliteDialect({ database: kyFile }), 'Kysely over better-sqlite3'),
    pgRaw(pool),
    kyselyOn(new PostgresDialect({ pool: new pg.Pool({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres', max: 4 }) }), 'Kysely over pg (PostgreSQL 15)'),
  ];
  const results = new Map(backends.map((b) => [b.name, { page: [], one: [], write: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of backends) {
      const r = results.get(b.name);
      r.page.push(await timeOps(() => b.page(), 40));
      r.one.push(await timeOps((i) => b.one(`1.2.826.0.1.${(i * 37) % SCANS + 1}`), 400));
      r.write.push(await timeOps(() => b.write(), 20));
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const base = results.get(direct.name);
  console.log(`| backend | page of ${PAGE} scans + their findings (µs) | one scan by id (µs) | 100-instance insert transaction (µs) |`);
  console.log('|---|---|---|---|');
  for (const [name, r] of results) {
    const cell = (k) => `${median(r[k]).toFixed(0)} (${(median(r[k]) / median(base[k])).toFixed(2)}x)`;
    console.log(`| ${name} | ${cell('page')} | ${cell('one')} | ${cell('write')} |`);
  }
  for (const b of backends) await b.close();
  await pool.end();
} finally {
  server.stop();
  rmSync(dir, { recursive: true, force: true });
}
