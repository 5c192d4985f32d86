-- npuscope trace store, schema version 5: traces imported from other profilers (torch.profiler /
-- Kineto, torch_npu). A run says where it came from and which rank of a job it was; the real
-- device tasks of an imported trace (GPU kernels, Ascend AI Core / AI CPU / HCCL tasks, copies)
-- get a table of their own, linked to the host op that launched them. docs/schema.md documents
-- every column.

ALTER TABLE runs ADD COLUMN source TEXT;       -- NULL: recorded by npuscope; else the importer's format
ALTER TABLE runs ADD COLUMN source_path TEXT;  -- the imported file or folder
ALTER TABLE runs ADD COLUMN rank INTEGER;
ALTER TABLE runs ADD COLUMN world_size INTEGER;

CREATE TABLE device_tasks (
  id          INTEGER PRIMARY KEY,
  run_id      INTEGER NOT NULL,
  step        INTEGER,
  op_id       INTEGER,
  device      INTEGER NOT NULL,
  stream      INTEGER NOT NULL,
  name_id     INTEGER NOT NULL,
  type_id     INTEGER NOT NULL,
  start_ns    INTEGER NOT NULL,
  dur_ns      INTEGER NOT NULL,
  correlation INTEGER,
  shapes_id   INTEGER,
  bytes       INTEGER,
  comm_group  TEXT
);
CREATE INDEX device_tasks_run_start ON device_tasks(run_id, start_ns);
