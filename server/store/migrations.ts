/**
 * Numbered schema migrations, one list for both backends, applied in order at start. Each step is
 * written in SQLite's dialect and translated for PostgreSQL by `postgresDdl` (types and keys); a
 * step whose PostgreSQL form differs beyond that (a table rebuild SQLite needs and PostgreSQL
 * does not, triggers, JSON functions) gives it beside the SQLite text. SQLite records how far a
 * database has come in PRAGMA user_version, PostgreSQL in the table mia_schema; a database written
 * by an older mia is upgraded in place and a newer one is refused rather than misread.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';

type Migration = { version: number; name: string; sql: string; postgres?: string };

const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) STRICT;

      CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        email TEXT NOT NULL UNIQUE COLLATE NOCASE,
        name TEXT,
        role TEXT NOT NULL CHECK (role IN ('radiologist', 'data_engineer', 'admin')),
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      ) STRICT;

      CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        user_id INTEGER NOT NULL REFERENCES users (id),
        name TEXT,
        digest TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        extra_scopes TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        expires_at TEXT,
        revoked_at TEXT,
        replaced_by INTEGER REFERENCES api_keys (id)
      ) STRICT;
      CREATE INDEX api_keys_user ON api_keys (user_id);

      CREATE TABLE patients (
        id INTEGER PRIMARY KEY,
        patient_id TEXT NOT NULL UNIQUE,
        name TEXT,
        birth_date TEXT,
        sex TEXT,
        created_at TEXT NOT NULL
      ) STRICT;

      CREATE TABLE studies (
        id INTEGER PRIMARY KEY,
        study_uid TEXT NOT NULL UNIQUE,
        patient_ref INTEGER NOT NULL REFERENCES patients (id),
        study_date TEXT,
        study_time TEXT,
        description TEXT,
        accession_number TEXT,
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX studies_patient ON studies (patient_ref);

      CREATE TABLE scans (
        id INTEGER PRIMARY KEY,
        scan_id TEXT NOT NULL UNIQUE,
        study_ref INTEGER NOT NULL REFERENCES studies (id),
        modality TEXT NOT NULL,
        body_part TEXT,
        description TEXT,
        series_number INTEGER,
        instance_count INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'received' CHECK (status IN
          ('received', 'queued', 'analyzing', 'analyzed', 'failed', 'in_review', 'reviewed', 'reported', 'archived')),
        status_reason TEXT,
        -- The scan's result: kept here, in the transaction that stores a succeeded analysis,
        -- so worklist and result queries need no per-row subquery.
        latest_analysis_ref INTEGER,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX scans_study ON scans (study_ref);
      CREATE INDEX scans_status ON scans (status);
      CREATE INDEX scans_modality ON scans (modality);

      CREATE TABLE instances (
        id INTEGER PRIMARY KEY,
        sop_instance_uid TEXT NOT NULL UNIQUE,
        scan_ref INTEGER NOT NULL REFERENCES scans (id),
        sop_class_uid TEXT,
        transfer_syntax TEXT NOT NULL,
        rows INTEGER NOT NULL,
        columns INTEGER NOT NULL,
        frames INTEGER NOT NULL DEFAULT 1,
        instance_number INTEGER,
        position REAL,
        pixel_spacing TEXT,
        file_path TEXT NOT NULL,
        file_sha256 TEXT NOT NULL,
        file_size INTEGER NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX instances_scan ON instances (scan_ref);

      CREATE TABLE analyses (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        scan_ref INTEGER NOT NULL REFERENCES scans (id),
        model_id TEXT NOT NULL,
        model_name TEXT NOT NULL,
        model_version TEXT NOT NULL,
        model_sha256 TEXT NOT NULL,
        thresholds TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'not_applicable', 'cancelled')),
        error TEXT,
        recommendation TEXT,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
      ) STRICT;
      CREATE INDEX analyses_scan ON analyses (scan_ref, status);

      CREATE TABLE findings (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        analysis_ref INTEGER NOT NULL REFERENCES analyses (id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
        x REAL NOT NULL,
        y REAL NOT NULL,
        width REAL NOT NULL,
        height REAL NOT NULL,
        instance_uid TEXT NOT NULL,
        frame INTEGER NOT NULL DEFAULT 0,
        review TEXT CHECK (review IN ('accepted', 'rejected')),
        reviewed_by INTEGER REFERENCES users (id),
        reviewed_at TEXT
      ) STRICT;
      CREATE INDEX findings_analysis ON findings (analysis_ref);

      CREATE TABLE reports (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        scan_ref INTEGER NOT NULL REFERENCES scans (id),
        analysis_ref INTEGER REFERENCES analyses (id),
        status TEXT NOT NULL CHECK (status IN ('draft', 'final')),
        impression TEXT NOT NULL DEFAULT '',
        recommendation TEXT NOT NULL DEFAULT '',
        findings TEXT NOT NULL DEFAULT '[]',
        author_ref INTEGER NOT NULL REFERENCES users (id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        finalized_at TEXT,
        finalized_by INTEGER REFERENCES users (id)
      ) STRICT;
      CREATE INDEX reports_scan ON reports (scan_ref);

      CREATE TABLE exports (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        created_by INTEGER NOT NULL REFERENCES users (id),
        format TEXT NOT NULL CHECK (format IN ('csv', 'xml', 'json')),
        filters TEXT NOT NULL DEFAULT '{}',
        deidentified INTEGER NOT NULL CHECK (deidentified IN (0, 1)),
        status TEXT NOT NULL CHECK (status IN ('ready', 'failed')),
        row_count INTEGER NOT NULL DEFAULT 0,
        file_name TEXT,
        size_bytes INTEGER,
        sha256 TEXT,
        error TEXT,
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX exports_creator ON exports (created_by);

      CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        request_id TEXT,
        key_id TEXT,
        user_id TEXT,
        action TEXT NOT NULL,
        target TEXT,
        patient_id TEXT,
        outcome TEXT NOT NULL,
        status_code INTEGER
      ) STRICT;
      CREATE INDEX audit_events_at ON audit_events (at);
    `,
  },
  {
    version: 2,
    name: 'import jobs and display attributes of instances',
    sql: `
      -- What a viewer needs to lay out and window an image without opening the file
      -- (PS3.3 C.7.6.2 plane, C.7.6.3 pixel, C.11.1 modality LUT, C.11.2 VOI LUT).
      ALTER TABLE instances ADD COLUMN samples_per_pixel INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE instances ADD COLUMN photometric TEXT NOT NULL DEFAULT 'MONOCHROME2';
      ALTER TABLE instances ADD COLUMN bits_allocated INTEGER NOT NULL DEFAULT 16;
      ALTER TABLE instances ADD COLUMN bits_stored INTEGER NOT NULL DEFAULT 16;
      ALTER TABLE instances ADD COLUMN pixel_representation INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE instances ADD COLUMN rescale_slope REAL NOT NULL DEFAULT 1;
      ALTER TABLE instances ADD COLUMN rescale_intercept REAL NOT NULL DEFAULT 0;
      ALTER TABLE instances ADD COLUMN window_center REAL;
      ALTER TABLE instances ADD COLUMN window_width REAL;
      ALTER TABLE instances ADD COLUMN image_position TEXT;
      ALTER TABLE instances ADD COLUMN image_orientation TEXT;
      CREATE INDEX instances_scan_order ON instances (scan_ref, position, instance_number);
      CREATE INDEX instances_sha256 ON instances (file_sha256);

      CREATE TABLE import_jobs (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('path', 'upload', 'watch')),
        sources TEXT NOT NULL DEFAULT '[]',
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
        files_total INTEGER,
        files_seen INTEGER NOT NULL DEFAULT 0,
        imported INTEGER NOT NULL DEFAULT 0,
        duplicates INTEGER NOT NULL DEFAULT 0,
        conflicts INTEGER NOT NULL DEFAULT 0,
        rejected INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        -- Files of the (sorted) walk whose outcome is committed: a resumed job skips them.
        checkpoint INTEGER NOT NULL DEFAULT 0,
        owner_pid INTEGER,
        heartbeat_at TEXT,
        created_by TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        finished_at TEXT
      ) STRICT;
      CREATE INDEX import_jobs_status ON import_jobs (status);

      CREATE TABLE import_rejects (
        id INTEGER PRIMARY KEY,
        job_ref INTEGER NOT NULL REFERENCES import_jobs (id) ON DELETE CASCADE,
        outcome TEXT NOT NULL CHECK (outcome IN ('rejected', 'conflict')),
        path TEXT NOT NULL,
        reason TEXT NOT NULL,
        sop_instance_uid TEXT
      ) STRICT;
      CREATE INDEX import_rejects_job ON import_rejects (job_ref, id);
    `,
  },
  {
    version: 3,
    name: 'analysis jobs: progress and ownership of analyses',
    sql: `
      -- An analysis row is also its job: queued -> running -> succeeded | failed |
      -- not_applicable | cancelled. owner_pid + heartbeat_at say which process runs it, so a
      -- job left running by a process that died is queued again by the next start.
      ALTER TABLE analyses ADD COLUMN slices_done INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE analyses ADD COLUMN slices_total INTEGER;
      ALTER TABLE analyses ADD COLUMN owner_pid INTEGER;
      ALTER TABLE analyses ADD COLUMN heartbeat_at TEXT;
      ALTER TABLE analyses ADD COLUMN requested_by TEXT;
      CREATE INDEX analyses_status ON analyses (status, id);
    `,
  },
  {
    version: 4,
    name: 'audit: the patients a list read or an export touched',
    sql: `
      -- A list read or an export reaches many patients; patient_id holds one. patient_ids is a
      -- JSON array of every distinct patient id in what was returned or written.
      ALTER TABLE audit_events ADD COLUMN patient_ids TEXT;
    `,
  },
  {
    version: 5,
    name: 'analysis jobs: interruptions',
    sql: `
      -- How often the process running a job died under it. A file that kills the process
      -- would otherwise be resumed into the same death at every start (issue 10).
      ALTER TABLE analyses ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 6,
    name: 'audit: counted refusals, ids never reused, the archive files',
    sql: `
      -- Rebuilt for AUTOINCREMENT: retention moves old events to archive files, and a plain
      -- rowid would hand out the ids of archived events again once the newest rows had left
      -- the table; cursors and the archive both name events by id (issue 10).
      CREATE TABLE audit_events_v6 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        request_id TEXT,
        key_id TEXT,
        user_id TEXT,
        action TEXT NOT NULL,
        target TEXT,
        patient_id TEXT,
        outcome TEXT NOT NULL,
        status_code INTEGER,
        patient_ids TEXT,
        -- Refused and throttled requests are one row per address, action, outcome, route and
        -- minute (bucket), counted, so a flood of them cannot grow the table without bound.
        address TEXT,
        count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1),
        bucket TEXT
      ) STRICT;
      INSERT INTO audit_events_v6 (id, at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids)
        SELECT id, at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids FROM audit_events;
      DROP TABLE audit_events;
      ALTER TABLE audit_events_v6 RENAME TO audit_events;
      CREATE INDEX audit_events_at ON audit_events (at);
      CREATE UNIQUE INDEX audit_events_bucket ON audit_events (bucket) WHERE bucket IS NOT NULL;

      -- The archive files retention wrote (<data>/audit-archive/). A row commits in the
      -- transaction that deletes the archived events, so an event is always either live or in
      -- a recorded file; the SHA-256 here checks the file each time it is read.
      CREATE TABLE audit_archives (
        id INTEGER PRIMARY KEY,
        file TEXT NOT NULL UNIQUE,
        sha256 TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        rows INTEGER NOT NULL,
        first_id INTEGER NOT NULL,
        last_id INTEGER NOT NULL,
        first_at TEXT NOT NULL,
        last_at TEXT NOT NULL,
        archived_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX audit_archives_first_id ON audit_archives (first_id);
    `,
    // Identity columns never hand an id out twice: no rebuild, the new columns only.
    postgres: `
      ALTER TABLE audit_events ADD COLUMN address TEXT;
      ALTER TABLE audit_events ADD COLUMN count BIGINT NOT NULL DEFAULT 1 CHECK (count >= 1);
      ALTER TABLE audit_events ADD COLUMN bucket TEXT;
      CREATE UNIQUE INDEX audit_events_bucket ON audit_events (bucket) WHERE bucket IS NOT NULL;
      CREATE TABLE audit_archives (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        file TEXT NOT NULL UNIQUE,
        sha256 TEXT NOT NULL,
        bytes BIGINT NOT NULL,
        rows BIGINT NOT NULL,
        first_id BIGINT NOT NULL,
        last_id BIGINT NOT NULL,
        first_at TEXT NOT NULL,
        last_at TEXT NOT NULL,
        archived_at TEXT NOT NULL
      );
      CREATE INDEX audit_archives_first_id ON audit_archives (first_id);
    `,
  },
  {
    version: 7,
    name: 'import jobs: where the last interruption happened',
    sql: `
      -- The checkpoint a path job stood at when its process last died under it. Dying again at
      -- the same checkpoint means a file of that batch takes the process down: the job is then
      -- failed, not resumed into the same death at every start (issue 10).
      ALTER TABLE import_jobs ADD COLUMN interrupted_at_checkpoint INTEGER;
    `,
  },
  {
    version: 8,
    name: 'reports: recommendation basis and addenda',
    sql: `
      -- What the report's recommendation was built from (issue 11): the model's own suggestion
      -- (no verdict yet), the reader's verdicts (accepted findings, per modality), or the
      -- reader's own words. Only 'reader' text is kept when verdicts change on a draft.
      ALTER TABLE reports ADD COLUMN recommendation_basis TEXT NOT NULL DEFAULT 'model'
        CHECK (recommendation_basis IN ('model', 'verdicts', 'reader'));

      -- Signed sections added to a final report: the report itself never changes, so a later
      -- change of mind (text, finding verdicts) is a new dated section with its author.
      CREATE TABLE report_addenda (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        report_ref INTEGER NOT NULL REFERENCES reports (id),
        author_ref INTEGER NOT NULL REFERENCES users (id),
        text TEXT NOT NULL,
        finding_changes TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX report_addenda_report ON report_addenda (report_ref, id);
      -- Append-only: a signed addendum is a medico-legal record like the report it extends.
      CREATE TRIGGER report_addenda_no_update BEFORE UPDATE ON report_addenda
        BEGIN SELECT RAISE(ABORT, 'report addenda are append-only'); END;
      CREATE TRIGGER report_addenda_no_delete BEFORE DELETE ON report_addenda
        BEGIN SELECT RAISE(ABORT, 'report addenda are append-only'); END;
    `,
    postgres: `
      ALTER TABLE reports ADD COLUMN recommendation_basis TEXT NOT NULL DEFAULT 'model'
        CHECK (recommendation_basis IN ('model', 'verdicts', 'reader'));
      CREATE TABLE report_addenda (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        report_ref BIGINT NOT NULL REFERENCES reports (id),
        author_ref BIGINT NOT NULL REFERENCES users (id),
        text TEXT NOT NULL,
        finding_changes TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL
      );
      CREATE INDEX report_addenda_report ON report_addenda (report_ref, id);
      CREATE FUNCTION mia_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'report addenda are append-only'; END $$;
      CREATE TRIGGER report_addenda_no_update BEFORE UPDATE ON report_addenda
        FOR EACH ROW EXECUTE FUNCTION mia_append_only();
      CREATE TRIGGER report_addenda_no_delete BEFORE DELETE ON report_addenda
        FOR EACH ROW EXECUTE FUNCTION mia_append_only();
    `,
  },
  {
    version: 9,
    name: 'instances: per-frame values of Enhanced multi-frame images',
    sql: `
      -- Enhanced multi-frame images keep rescale, spacing, position and windows per frame in
      -- functional groups (PS3.3 C.7.6.16): JSON, one entry per frame, NULL when every frame
      -- has the instance's values (classic images). Files imported earlier keep NULL.
      ALTER TABLE instances ADD COLUMN frame_values TEXT;
    `,
  },
  {
    version: 10,
    name: 'instances: why per-frame values could not be read',
    sql: `
      -- A multi-frame image whose Per-frame Functional Groups do not give every frame its values
      -- is shown with the shared ones; the viewer says so, and analysis refuses it.
      ALTER TABLE instances ADD COLUMN frames_problem TEXT;
    `,
  },
  {
    version: 11,
    name: 'measurements: lengths, ROIs and probes kept per reader',
    sql: `
      -- A reader's measurements on one frame: points in image pixels (column, row), values in mm
      -- from that frame's pixel spacing and in modality units (HU on CT). Per reader: each
      -- radiologist sees and reports their own (issue 11, reading tools).
      CREATE TABLE measurements (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        scan_ref INTEGER NOT NULL REFERENCES scans (id),
        instance_ref INTEGER NOT NULL REFERENCES instances (id),
        frame INTEGER NOT NULL,
        user_ref INTEGER NOT NULL REFERENCES users (id),
        kind TEXT NOT NULL CHECK (kind IN ('length', 'ellipse', 'rectangle', 'probe')),
        points TEXT NOT NULL,
        length_mm REAL,
        area_mm2 REAL,
        mean REAL,
        sd REAL,
        value REAL,
        unit TEXT,
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX measurements_scan_user ON measurements (scan_ref, user_ref);
    `,
  },
  {
    version: 12,
    name: 'findings: reader-drawn findings and reasons for rejecting',
    sql: `
      -- A radiologist adds a finding the model missed (source 'reader', drawn by created_by) to
      -- the scan's latest analysis, so reports and their verdict lock treat it like the model's;
      -- and says why a finding was rejected (review_reason), which the report and exports carry.
      ALTER TABLE findings ADD COLUMN source TEXT NOT NULL DEFAULT 'model' CHECK (source IN ('model', 'reader'));
      ALTER TABLE findings ADD COLUMN created_by INTEGER REFERENCES users (id);
      ALTER TABLE findings ADD COLUMN review_reason TEXT;
    `,
  },
  {
    version: 13,
    name: 'analyses: the triage urgency of each label, as the model declared it',
    sql: `
      -- Triage (issue 11): the worklist priority comes from the findings and the urgency their
      -- labels had in the manifest the analysis ran with, kept like the thresholds so a later
      -- manifest cannot re-prioritise what was already read. JSON: label -> { urgency
      -- (urgent | soon | routine), display_name } (the name the priority's reason used).
      ALTER TABLE analyses ADD COLUMN triage_labels TEXT NOT NULL DEFAULT '{}';
      -- Analyses made before triage: the bundled model is the only one whose labels' urgency is
      -- known (its manifest of this release); any other model's findings stay routine.
      UPDATE analyses SET triage_labels = json_object(
          'tumor_detected', json_object('urgency', 'soon', 'display_name', 'Mass / tumour'),
          'hemorrhage_detected', json_object('urgency', 'urgent', 'display_name', 'Intracranial haemorrhage'),
          'infarct_detected', json_object('urgency', 'urgent', 'display_name', 'Infarct'))
        WHERE model_id = 'mia-phantom-detector';
    `,
    postgres: `
      ALTER TABLE analyses ADD COLUMN triage_labels TEXT NOT NULL DEFAULT '{}';
      UPDATE analyses SET triage_labels = json_build_object(
          'tumor_detected', json_build_object('urgency', 'soon', 'display_name', 'Mass / tumour'),
          'hemorrhage_detected', json_build_object('urgency', 'urgent', 'display_name', 'Intracranial haemorrhage'),
          'infarct_detected', json_build_object('urgency', 'urgent', 'display_name', 'Infarct'))::text
        WHERE model_id = 'mia-phantom-detector';
    `,
  },
  {
    version: 14,
    name: 'hub: the processes that run jobs, which one owns each job, shared rate limits',
    sql: `
      -- Every mia process that opens the database (a server node, a CLI command) has a row while
      -- it runs, with the host it runs on and a heartbeat (issue 12). A job names its owner by
      -- this row: pids are unique on one host only, and a hub's nodes run on several; a node on
      -- another host is judged by its heartbeat, one on this host also by its pid.
      CREATE TABLE nodes (
        id INTEGER PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL
      ) STRICT;
      ALTER TABLE analyses ADD COLUMN owner_node INTEGER;
      ALTER TABLE import_jobs ADD COLUMN owner_node INTEGER;
      -- Requests per key (or address) and window, counted where every node of a hub sees them:
      -- limits that hold per node would let N nodes take N times the limit.
      CREATE TABLE rate_limits (
        bucket TEXT NOT NULL,
        window_start INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (bucket, window_start)
      ) STRICT;
    `,
    // Counts of the last minutes: UNLOGGED, so counting a request writes no WAL and waits for no
    // fsync (a crash empties the table, which only forgives the current minute).
    postgres: `
      CREATE TABLE nodes (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        host TEXT NOT NULL,
        pid BIGINT NOT NULL,
        started_at TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL
      );
      ALTER TABLE analyses ADD COLUMN owner_node BIGINT;
      ALTER TABLE import_jobs ADD COLUMN owner_node BIGINT;
      CREATE UNLOGGED TABLE rate_limits (
        bucket TEXT NOT NULL,
        window_start BIGINT NOT NULL,
        count BIGINT NOT NULL,
        PRIMARY KEY (bucket, window_start)
      );
    `,
  },
  {
    version: 15,
    name: 'sync: the change log, numbered in commit order',
    sql: `
      -- Every change the hub accepts or makes, for workstations to pull (docs/sync.md). seq is
      -- the pull cursor: writers take one lock until they commit (sync-log.ts), so numbers are
      -- taken in commit order and a reader past seq n has seen every change numbered below it.
      CREATE TABLE sync_changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        change_id TEXT NOT NULL UNIQUE,
        device_id TEXT NOT NULL,
        entity TEXT NOT NULL,
        entity_key TEXT NOT NULL,
        op TEXT NOT NULL,
        hlc TEXT NOT NULL,
        user_id TEXT,
        payload TEXT NOT NULL,
        committed_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX sync_changes_entity ON sync_changes (entity, entity_key);
    `,
  },
  {
    version: 16,
    name: 'sync: enrolled devices and their keys, push receipts',
    sql: `
      -- Workstations a hub admin enrolled (mia devices enroll NAME): a UUIDv7 id and a key in the
      -- usual format, kept as its digest like any API key, whose scopes are sync:push and
      -- sync:pull only. A device belongs to no user: each change it pushes names its acting user.
      CREATE TABLE devices (
        id INTEGER PRIMARY KEY,
        device_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        key_public_id TEXT NOT NULL UNIQUE,
        key_digest TEXT NOT NULL UNIQUE,
        key_prefix TEXT NOT NULL,
        enrolled_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_seen_at TEXT,
        -- The newest change number the device has pulled, and its clock against the hub's at
        -- its last push (ms, positive when ahead): the devices screen's lag and skew.
        pulled_seq INTEGER NOT NULL DEFAULT 0,
        clock_offset_ms INTEGER,
        revoked_at TEXT
      ) STRICT;

      -- A push's answer, kept under its Idempotency-Key: the same push sent again (its answer
      -- was lost) gets the same answer, and nothing is applied twice.
      CREATE TABLE sync_receipts (
        device_ref INTEGER NOT NULL REFERENCES devices (id),
        idempotency_key TEXT NOT NULL,
        request_sha256 TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (device_ref, idempotency_key)
      ) STRICT;

      -- On a workstation the log is also its outbox: its own changes wait (push_state NULL) until
      -- the hub accepted them, or refused them for good with a reason the reader is shown.
      ALTER TABLE sync_changes ADD COLUMN push_state TEXT CHECK (push_state IN ('accepted', 'rejected'));
      ALTER TABLE sync_changes ADD COLUMN push_error TEXT;
      -- A workstation pushes its pending changes in order, and its status (polled by the UI) counts
      -- the pending and refused ones: partial indexes hold only those, not the whole history.
      CREATE INDEX sync_changes_pending ON sync_changes (device_id, seq) WHERE push_state IS NULL;
      CREATE INDEX sync_changes_refused ON sync_changes (device_id) WHERE push_state = 'rejected';
      -- Its clock restarts after its newest timestamp.
      CREATE INDEX sync_changes_device_hlc ON sync_changes (device_id, hlc);
    `,
  },
  {
    version: 17,
    name: 'sync: verdicts as append-only events',
    sql: `
      -- Every verdict on a finding, from any workstation or the hub, kept (docs/sync.md, Verdicts).
      -- A finding's current verdict is derived: among the events no later event has seen
      -- (supersedes: the event ids that were current where this one was made), the one with the
      -- highest HLC; more than one such event with different verdicts makes it disputed. The
      -- finding's review columns hold the derived verdict, so every reader of findings is unchanged.
      CREATE TABLE review_events (
        id INTEGER PRIMARY KEY,
        event_id TEXT NOT NULL UNIQUE,
        finding_ref INTEGER NOT NULL REFERENCES findings (id),
        verdict TEXT CHECK (verdict IN ('accepted', 'rejected')),
        reason TEXT,
        user_id TEXT,
        hlc TEXT NOT NULL,
        supersedes TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX review_events_finding ON review_events (finding_ref, hlc);
      -- Which events each event had seen, one row per pair: an event is a head while no row
      -- names it as seen. head caches that, so deriving a verdict reads the heads alone, not a
      -- history that a busy finding (or a hostile device) can make long.
      CREATE TABLE review_supersedes (
        superseded_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (superseded_id, event_id)
      ) STRICT;
      ALTER TABLE review_events ADD COLUMN head INTEGER NOT NULL DEFAULT 1 CHECK (head IN (0, 1));
      CREATE INDEX review_events_heads ON review_events (finding_ref, head);
      ALTER TABLE findings ADD COLUMN review_disputed INTEGER NOT NULL DEFAULT 0 CHECK (review_disputed IN (0, 1));
    `,
  },
  {
    version: 18,
    name: 'sync: changes quarantined for an admin',
    sql: `
      -- A change the hub will not merge on its own (docs/sync.md): an instance whose Patient ID
      -- the hub already holds with other demographics. Kept whole, with its device and why, for an
      -- admin to look at; the device is told it was refused and why.
      CREATE TABLE sync_quarantine (
        id INTEGER PRIMARY KEY,
        change_id TEXT NOT NULL UNIQUE,
        device_id TEXT NOT NULL,
        entity TEXT NOT NULL,
        entity_key TEXT NOT NULL,
        reason TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 19,
    name: 'sync: users and keys come down from the hub',
    sql: `
      -- The hub is authoritative for people (docs/sync.md, Users): a workstation keeps the hub's
      -- users and their keys (digests, as everywhere) so a reader signs in offline with the key
      -- the hub gave them. origin says whose a row is: 'hub' rows are replaced by each sync and
      -- cannot be edited here; 'local' rows are this install's own.
      ALTER TABLE users ADD COLUMN origin TEXT NOT NULL DEFAULT 'local' CHECK (origin IN ('local', 'hub'));
      -- When the user was disabled: a change made offline before then is still theirs to make,
      -- one made after is quarantined for an admin.
      ALTER TABLE users ADD COLUMN disabled_at TEXT;
      ALTER TABLE api_keys ADD COLUMN origin TEXT NOT NULL DEFAULT 'local' CHECK (origin IN ('local', 'hub'));
      UPDATE users SET disabled_at = updated_at WHERE status = 'disabled';
    `,
  },
  {
    version: 20,
    name: 'sync: reports, their conflicts, and changes that wait for what they name',
    sql: `
      -- A report's reader-written fields are last-writer-wins by HLC (docs/sync.md, Reports): the
      -- timestamp of the value each field holds, and of the finalization the report is signed by.
      ALTER TABLE reports ADD COLUMN impression_hlc TEXT;
      ALTER TABLE reports ADD COLUMN recommendation_hlc TEXT;
      ALTER TABLE reports ADD COLUMN final_hlc TEXT;
      ALTER TABLE reports ADD COLUMN final_change_id TEXT;
      -- A draft edit that would have won but arrived after the report was signed: never applied,
      -- kept and shown with the report. Named by (report, field, timestamp) so every replica that
      -- sees it records the same row once.
      CREATE TABLE report_conflicts (
        id INTEGER PRIMARY KEY,
        report_ref INTEGER NOT NULL REFERENCES reports (id),
        field TEXT NOT NULL CHECK (field IN ('impression', 'recommendation')),
        value TEXT NOT NULL,
        hlc TEXT NOT NULL,
        user_id TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (report_ref, field, hlc)
      ) STRICT;
      -- Pulled changes that name what is not here yet (a report whose scan was not assigned to
      -- this workstation, an addendum before its report's author came down): kept whole and
      -- tried again each round, instead of skipped for good as the cursor moves on.
      CREATE TABLE sync_inbox (
        id INTEGER PRIMARY KEY,
        change_id TEXT NOT NULL UNIQUE,
        device_id TEXT NOT NULL,
        entity TEXT NOT NULL,
        entity_key TEXT NOT NULL,
        op TEXT NOT NULL,
        hlc TEXT NOT NULL,
        user_id TEXT,
        payload TEXT NOT NULL,
        reason TEXT NOT NULL,
        received_at TEXT NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 21,
    name: 'sync: workstations\' audit trails on the hub with gaps visible, and the writes to reports',
    sql: `
      -- On the hub, an event a workstation recorded keeps its device and its number there (the
      -- workstation's own event id, which only ever grows), so a missing number is a visible gap.
      ALTER TABLE audit_events ADD COLUMN device_id TEXT;
      ALTER TABLE audit_events ADD COLUMN device_seq INTEGER;
      CREATE UNIQUE INDEX audit_events_device_seq ON audit_events (device_id, device_seq) WHERE device_id IS NOT NULL;
      -- The number the hub expects next from each device, and the numbers it never got.
      ALTER TABLE devices ADD COLUMN audit_next_seq INTEGER;
      CREATE TABLE audit_gaps (
        id INTEGER PRIMARY KEY,
        device_ref INTEGER NOT NULL REFERENCES devices (id),
        from_seq INTEGER NOT NULL,
        to_seq INTEGER NOT NULL,
        found_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX audit_gaps_device ON audit_gaps (device_ref);
      -- Every write to a report this replica took in (its own and others'), with the fields it
      -- wrote: a signed report's conflicts are derived from these, whatever order they came in.
      CREATE TABLE report_writes (
        change_id TEXT PRIMARY KEY,
        report_ref INTEGER NOT NULL REFERENCES reports (id),
        hlc TEXT NOT NULL,
        user_id TEXT,
        fields TEXT NOT NULL
      ) STRICT;
      CREATE INDEX report_writes_report ON report_writes (report_ref);
    `,
  },
  {
    version: 22,
    name: 'sync: studies assigned to workstations',
    sql: `
      -- Taking work offline (docs/sync.md, Assignment): the hub gives a study to a workstation
      -- (and, for the worklist there, to a reader); the workstation pulls its files so the study
      -- can be read without the network. Removing an assignment keeps the row (removed_at).
      CREATE TABLE study_assignments (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        study_uid TEXT NOT NULL,
        device_ref INTEGER NOT NULL REFERENCES devices (id),
        reader_id TEXT,
        assigned_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        removed_at TEXT
      ) STRICT;
      CREATE UNIQUE INDEX study_assignments_live ON study_assignments (study_uid, device_ref) WHERE removed_at IS NULL;
      CREATE INDEX study_assignments_device ON study_assignments (device_ref);
    `,
  },
  {
    version: 23,
    name: 'sync: an admin releases or discards a quarantined change',
    sql: `
      -- What releasing needs to apply the change as it was made (its timestamp and user), and the
      -- admin's decision, kept: a quarantined change is never deleted.
      ALTER TABLE sync_quarantine ADD COLUMN hlc TEXT;
      ALTER TABLE sync_quarantine ADD COLUMN user_id TEXT;
      ALTER TABLE sync_quarantine ADD COLUMN resolution TEXT CHECK (resolution IN ('released', 'discarded'));
      ALTER TABLE sync_quarantine ADD COLUMN resolved_by TEXT;
      ALTER TABLE sync_quarantine ADD COLUMN resolved_at TEXT;
    `,
  },
  {
    version: 24,
    name: 'sync: archiving a scan as a last-writer-wins flag',
    sql: `
      -- The HLC of the newest archive or unarchive decision this replica took in for the scan
      -- (docs/sync.md, Scan status): a decision older than it changes nothing.
      ALTER TABLE scans ADD COLUMN archived_hlc TEXT;
    `,
  },
  {
    version: 25,
    name: 'dicom: the DICOM nodes and DICOMweb servers this install talks to',
    sql: `
      -- A PACS, modality or viewer (kind dimse: AE title, host, port) or a DICOMweb server (kind
      -- dicomweb: base URL and the Authorization header it wants). allow_incoming: the node may
      -- open associations with mia's SCP and be a C-MOVE destination. The header is a credential
      -- of the other system that mia must present, so it is kept as given and never returned by
      -- the API or logged.
      CREATE TABLE dicom_peers (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('dimse', 'dicomweb')),
        ae_title TEXT,
        host TEXT,
        port INTEGER,
        url TEXT,
        auth_header TEXT,
        allow_incoming INTEGER NOT NULL DEFAULT 0 CHECK (allow_incoming IN (0, 1)),
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX dicom_peers_ae ON dicom_peers (ae_title);
    `,
  },
  {
    version: 26,
    name: 'dicom: routing rules and the send jobs they make',
    sql: `
      -- "When <event> happens (and <conditions> hold), send <object> to <peer>" (issue 14, item 5).
      -- conditions is a JSON object (modalities, model_id, labels, positive_only: server/routing/
      -- rules.ts). The peer is named by its public id, not a foreign key: removing a peer must not
      -- fail on the rules and jobs that name it; their sends give up naming the peer as gone.
      CREATE TABLE routing_rules (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL UNIQUE,
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        event TEXT NOT NULL CHECK (event IN ('analysis.finished', 'report.finalized', 'instance.received')),
        object_kind TEXT NOT NULL CHECK (object_kind IN ('analysis_sr', 'report_sr', 'instance')),
        conditions TEXT NOT NULL DEFAULT '{}',
        peer_id TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX routing_rules_event ON routing_rules (event, enabled);
      -- One object to one peer, tried until sent or given up. Made in the transaction of the event
      -- itself (an analysis finishing, a report signed), so a crash cannot lose one; the row is the
      -- record. failed: the last attempt failed and another is due at next_attempt_at; gave_up: no
      -- more attempts (a permanent refusal, or max attempts). Owned while running like analyses
      -- (owner_node, owner_pid, heartbeat_at: server/jobs/jobs.ts), so two hub nodes never send one
      -- job at once. last_error names the peer's status or the network error, never patient data.
      CREATE TABLE send_jobs (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        rule_id TEXT,
        event TEXT NOT NULL,
        subject TEXT NOT NULL,
        object_kind TEXT NOT NULL CHECK (object_kind IN ('analysis_sr', 'report_sr', 'instance')),
        peer_id TEXT NOT NULL,
        method TEXT NOT NULL CHECK (method IN ('c-store', 'stow-rs')),
        status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'sent', 'failed', 'gave_up')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        last_error TEXT,
        sop_instance_uid TEXT,
        owner_node INTEGER,
        owner_pid INTEGER,
        heartbeat_at TEXT,
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
      ) STRICT;
      CREATE INDEX send_jobs_due ON send_jobs (status, next_attempt_at);
      CREATE INDEX send_jobs_status ON send_jobs (status, id);
      -- A rule sends an object once per event subject, however often the event is seen again.
      CREATE UNIQUE INDEX send_jobs_rule_subject ON send_jobs (rule_id, subject, object_kind) WHERE rule_id IS NOT NULL;
    `,
  },
  {
    version: 27,
    name: 'dicomweb: study searches by date and accession number walk an index',
    sql: `
      -- QIDO-RS (issue 14, item 3) matches studies on Study Date (ranges) and Accession Number,
      -- which nothing indexed before; Patient ID is unique already. Nothing to backfill.
      CREATE INDEX studies_date ON studies (study_date);
      CREATE INDEX studies_accession ON studies (accession_number);
    `,
  },
  {
    version: 28,
    name: 'dicom: retrieves from a PACS or DICOMweb server into the archive',
    sql: `
      -- A study, a series or a patient's priors pulled from a peer (issue 14, item 2): by C-MOVE to
      -- mia's own AE, or by WADO-RS. The row is what the user follows: status, the studies it
      -- covers with their own progress and import jobs (studies, JSON), and the sub-operation
      -- counts summed over them. The peer is named by public id and name as they were: removing
      -- the peer later leaves the record readable. patient_id is the study's patient, for the
      -- audit trail of reads. Owned while running like the other jobs (server/jobs/jobs.ts): a
      -- retrieve whose node is gone is marked interrupted, never resumed behind the user's back.
      CREATE TABLE retrieves (
        id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        peer_id TEXT NOT NULL,
        peer_name TEXT NOT NULL,
        method TEXT NOT NULL CHECK (method IN ('c-move', 'wado-rs')),
        target_kind TEXT NOT NULL CHECK (target_kind IN ('study', 'series', 'priors')),
        study_uid TEXT,
        series_uid TEXT,
        patient_id TEXT,
        options TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'partial', 'failed', 'interrupted')),
        studies TEXT NOT NULL DEFAULT '[]',
        completed INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        warning INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        owner_node INTEGER,
        owner_pid INTEGER,
        heartbeat_at TEXT,
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        finished_at TEXT
      ) STRICT;
      CREATE INDEX retrieves_status ON retrieves (status, id);
    `,
  },
  {
    version: 29,
    name: 'scale: filters on label and on modality with status walk an index',
    sql: `
      -- Issue 15 (100,000 scans, 300,000 findings; EXPLAIN QUERY PLAN and timings in the commit).
      -- Results filtered by label and confidence test each scan's latest analysis for a matching
      -- finding: with the label and confidence in the index that test reads the index alone
      -- (a label no scan has: 216 -> 87 ms; a rare one among MG scans: 33 -> 19 ms). It leads
      -- with analysis_ref, so it serves every lookup findings_analysis served, which goes.
      CREATE INDEX findings_analysis_label ON findings (analysis_ref, label, confidence);
      DROP INDEX findings_analysis;
      -- The worklist's modality and status filters together: one range instead of every scan of
      -- the modality (CT and queued: 24 -> under 0.1 ms).
      CREATE INDEX scans_modality_status ON scans (modality, status);
    `,
  },
  {
    version: 30,
    name: 'analyses record the operating point they ran at',
    sql: `
      -- Issue 16: a model may offer named operating points (per-label thresholds chosen on held-out
      -- data) and an admin picks one for the site. The thresholds were already kept per analysis;
      -- the point's name says why they were those. NULL: a manifest without operating points.
      ALTER TABLE analyses ADD COLUMN operating_point TEXT;
    `,
  },
  {
    version: 31,
    name: 'findings say what their location means: a box, the whole image, or a region',
    sql: `
      -- Issue 16 (bring your own model): a slice classifier scores an image without saying where,
      -- so its finding's location is the whole key image ('image'); a segmentation model's is the
      -- bounding box of a mask ('region'). Every finding before this was a detector's box.
      ALTER TABLE findings ADD COLUMN localization TEXT NOT NULL DEFAULT 'box' CHECK (localization IN ('box', 'image', 'region'));
    `,
  },
  {
    version: 32,
    name: 'analysis: a segmentation finding keeps its mask',
    sql: `
      -- Issue 16, item 3: a segmentation model's finding carries its region's mask on its key
      -- slice, as JSON {encoding: 'rle', x, y, width, height, counts} in the image's pixels
      -- (server/analysis/segmentation.ts). NULL for box models and for findings made before.
      ALTER TABLE findings ADD COLUMN mask TEXT;
    `,
  },
  {
    version: 33,
    name: 'the slice-order index carries each instance\'s frame count',
    sql: `
      -- A finding's slice number counts the frames of the instances before it in its series, and
      -- its "of N" all of them (store/instances.ts, PLACED_INSTANCES): with frames in the index
      -- those sums read the index alone, not a table row per instance (50 results on 150-slice
      -- series: the statement 1.2 ms -> see the commit). Same leading columns: the slice order's
      -- other readers use it as before.
      CREATE INDEX instances_slice_order ON instances (scan_ref, position, instance_number, frames);
      DROP INDEX instances_scan_order;
    `,
  },
  {
    version: 34,
    name: 'a pulled change waiting in the inbox names what it waits for',
    sql: `
      -- Every sync round tried the whole inbox again (migration 20). A workstation pulls all of
      -- the hub's changes but fetches files only for its assigned studies, so the changes of every
      -- other study wait for good: at a hospital's scale millions of rows, each parsed, checked
      -- and written again every round. Each now says what it waits for ('file:<sha256>',
      -- 'series:<uid>', 'analysis:<id>', 'finding:<id>', 'report:<id>'; server/sync/wait-keys.ts)
      -- and is tried again when that arrives; NULL (a user not known yet, rows kept before this):
      -- tried every round, and every row once an hour.
      ALTER TABLE sync_inbox ADD COLUMN waits_for TEXT;
      CREATE INDEX sync_inbox_waits_for ON sync_inbox (waits_for);
    `,
  },
  {
    version: 35,
    name: 'patients and studies keep their searchable text folded',
    sql: `
      -- Name searches (the worklist's, QIDO-RS PatientName and fuzzy matching) folded every row
      -- through mia_search_fold when asked, on SQLite a JavaScript function called once a row:
      -- ~1 us, 10 ms for 10,000 studies (SQLite's own LIKE: 1.2 ms), a second at a hospital's
      -- million. Rows are written once (store/archive-index.ts) and folded then; these fold the
      -- rows already there. The worklist searches name, patient ID, accession and description
      -- as one text; the fold maps character by character, so the folds joined by spaces are the
      -- fold of the text joined by spaces.
      ALTER TABLE patients ADD COLUMN name_fold TEXT NOT NULL DEFAULT '';
      ALTER TABLE patients ADD COLUMN patient_id_fold TEXT NOT NULL DEFAULT '';
      ALTER TABLE studies ADD COLUMN text_fold TEXT NOT NULL DEFAULT '';
      UPDATE patients SET name_fold = mia_search_fold(name), patient_id_fold = mia_search_fold(patient_id);
      UPDATE studies SET text_fold = mia_search_fold(coalesce(accession_number, '') || ' ' || coalesce(description, ''));
      CREATE INDEX patients_name_fold ON patients (name_fold);
    `,
  },
];

/** The newest step's number (steps are assigned numbers per branch, so the list may skip one). */
export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

function refuseNewer(current: number): void {
  if (current > SCHEMA_VERSION) {
    throw new Error(`database schema version ${current} is newer than this mia (${SCHEMA_VERSION}); upgrade mia`);
  }
}

export function applySqliteMigrations(db: BetterSqlite3.Database): void {
  const migrate = db.transaction(() => {
    const current = db.pragma('user_version', { simple: true }) as number;
    refuseNewer(current);
    for (const migration of MIGRATIONS) {
      if (migration.version <= current) continue;
      db.exec(migration.sql);
      db.pragma(`user_version = ${migration.version}`);
    }
  });
  // IMMEDIATE: a CLI command and a server starting together must not both apply migration 1.
  migrate.immediate();
}

/**
 * A step's SQLite text in PostgreSQL's dialect: rowid keys become identity columns (never
 * reused), every INTEGER a BIGINT (SQLite's are 64-bit: file sizes, ids), REAL a DOUBLE
 * PRECISION (PostgreSQL's REAL is 32-bit), NOCASE the case-insensitive ICU collation made by
 * the first step, and STRICT goes (PostgreSQL's columns are typed anyway).
 */
export function postgresDdl(sqlite: string): string {
  return sqlite
    .replace(/\bINTEGER PRIMARY KEY( AUTOINCREMENT)?/g, 'BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY')
    .replace(/\bINTEGER\b/g, 'BIGINT')
    .replace(/\bREAL\b/g, 'DOUBLE PRECISION')
    .replace(/COLLATE NOCASE/g, 'COLLATE mia_nocase')
    .replace(/\)\s*STRICT;/g, ');');
}

/** What the first PostgreSQL step needs before the tables: the collation users.email uses, and
 * the search fold of the worklist (lower case, accents removed, PN separators as spaces). */
const POSTGRES_PREAMBLE = `
  CREATE COLLATION IF NOT EXISTS mia_nocase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
  CREATE EXTENSION IF NOT EXISTS unaccent;
  CREATE FUNCTION mia_search_fold(value TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT translate(lower(unaccent(coalesce(value, ''))), '^=', '  ')
  $$;
`;

/** The steps as PostgreSQL runs them. */
export function postgresMigrationSql(migration: Migration): string {
  const body = migration.postgres ?? postgresDdl(migration.sql);
  return migration.version === 1 ? POSTGRES_PREAMBLE + body : body;
}

/** An advisory lock all nodes take to migrate: nodes starting together apply each step once. */
const MIGRATION_LOCK = 0x6d6961; // 'mia'

export async function applyPostgresMigrations(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    for (;;) {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        await client.query('CREATE TABLE IF NOT EXISTS mia_schema (version BIGINT NOT NULL)');
        const row = (await client.query<{ version: string }>('SELECT version FROM mia_schema')).rows[0];
        const current = row ? Number(row.version) : 0;
        refuseNewer(current);
        const next = MIGRATIONS.find((m) => m.version > current);
        if (!next) {
          await client.query('COMMIT');
          return;
        }
        await client.query(postgresMigrationSql(next));
        if (row) await client.query('UPDATE mia_schema SET version = $1', [next.version]);
        else await client.query('INSERT INTO mia_schema (version) VALUES ($1)', [next.version]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    }
  } finally {
    client.release();
  }
}
