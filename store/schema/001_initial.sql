-- npuscope trace store, schema version 1. Times are integer nanoseconds of a monotonic clock;
-- runs.wall_start_ns anchors them to the wall clock. docs/schema.md documents every column.

CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  started_ns       INTEGER NOT NULL,
  ended_ns         INTEGER,
  wall_start_ns    INTEGER NOT NULL,       -- Unix time of started_ns
  status           TEXT NOT NULL DEFAULT 'running',  -- running | completed | failed
  command          TEXT,
  model            TEXT,
  opt_level        TEXT,
  optimizer        TEXT,
  device           TEXT,                   -- "npu:0"
  config_json      TEXT,
  results_json     TEXT,
  dropped_records  INTEGER NOT NULL DEFAULT 0  -- records lost because producers outran the writer
);

-- Interned strings: op names, shape and dtype lists.
CREATE TABLE strings (
  id    INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);

CREATE TABLE op_events (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id),
  step            INTEGER,
  name_id         INTEGER NOT NULL REFERENCES strings(id),
  start_ns        INTEGER NOT NULL,
  dur_ns          INTEGER NOT NULL,
  thread_id       INTEGER NOT NULL,
  depth           INTEGER NOT NULL,
  parent_id       INTEGER,
  seq_nr          INTEGER,
  is_backward     INTEGER NOT NULL DEFAULT 0,
  shapes_id       INTEGER REFERENCES strings(id),
  dtypes_id       INTEGER REFERENCES strings(id),
  device          INTEGER,                 -- npu index, NULL for host-only ops
  device_start_ns INTEGER,                 -- modeled stream start
  device_dur_ns   INTEGER                  -- modeled device duration
);
CREATE INDEX op_events_run_thread_start ON op_events(run_id, thread_id, start_ns);
CREATE INDEX op_events_run_step ON op_events(run_id, step);

-- The ops table of the contract, names and shapes spelled out.
CREATE VIEW ops AS
  SELECT e.id, e.run_id, e.step, n.value AS name, e.start_ns, e.dur_ns, e.thread_id, e.depth,
         e.parent_id, e.seq_nr, e.is_backward, s.value AS input_shapes, d.value AS input_dtypes,
         CASE WHEN e.device IS NULL THEN NULL ELSE 'npu:' || e.device END AS device,
         e.device_start_ns, e.device_dur_ns
  FROM op_events e
  JOIN strings n ON n.id = e.name_id
  LEFT JOIN strings s ON s.id = e.shapes_id
  LEFT JOIN strings d ON d.id = e.dtypes_id;

CREATE TABLE steps (
  run_id     INTEGER NOT NULL REFERENCES runs(id),
  step       INTEGER NOT NULL,
  start_ns   INTEGER NOT NULL,
  dur_ns     INTEGER NOT NULL,
  loss       REAL,
  loss_scale REAL,                         -- the scale this step's backward used
  overflow   INTEGER NOT NULL DEFAULT 0,
  skipped    INTEGER NOT NULL DEFAULT 0,
  lr         REAL,
  grad_norm  REAL,
  PRIMARY KEY (run_id, step)
);

CREATE TABLE overflow_events (
  id      INTEGER PRIMARY KEY,
  run_id  INTEGER NOT NULL REFERENCES runs(id),
  step    INTEGER,
  ts_ns   INTEGER NOT NULL,
  source  TEXT NOT NULL,                   -- float_status | nonfinite_grad | dump_check
  op_name TEXT,
  detail  TEXT
);
CREATE INDEX overflow_events_run ON overflow_events(run_id, step);

CREATE TABLE tensor_dumps (
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  step      INTEGER,
  op_id     INTEGER,
  op_name   TEXT NOT NULL,
  op_type   TEXT NOT NULL,
  io        TEXT NOT NULL,                 -- input | output
  idx       INTEGER NOT NULL,
  dtype     TEXT NOT NULL,
  shape     TEXT NOT NULL,
  format    TEXT NOT NULL DEFAULT 'ND',
  min       REAL, max REAL, mean REAL, l2norm REAL,
  nan_count INTEGER, inf_count INTEGER,
  data      BLOB                           -- raw little-endian payload, zstd-compressed when it pays
);
CREATE INDEX tensor_dumps_run_op ON tensor_dumps(run_id, op_name);

CREATE TABLE memory (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  ts_ns     INTEGER NOT NULL,
  device    INTEGER NOT NULL,
  allocated INTEGER NOT NULL,
  reserved  INTEGER NOT NULL
);
CREATE INDEX memory_run_ts ON memory(run_id, ts_ns);
