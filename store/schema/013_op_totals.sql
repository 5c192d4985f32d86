-- npuscope trace store, schema version 13: a run's op table, stored when the run ends. The
-- writer counts every op it writes into groups by name and input shapes (calls, total, self,
-- min, max and device time, as TraceReader's op table counts them) and inserts one row per
-- group in the transaction that ends the run; a whole-run op table (npuscope report, the GUI's
-- Operators tab) then reads these rows instead of every op (10M ops: a few hundred rows, not a
-- scan of seconds). Runs without rows (files of older versions, runs that did not end, rows
-- other programs inserted) are read from op_events as before. docs/schema.md documents every
-- column.

CREATE TABLE op_totals (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  name_id      INTEGER NOT NULL,             -- strings.id of the ops' name (0: none)
  shapes_id    INTEGER NOT NULL,             -- strings.id of their input_shapes (0: not recorded)
  calls        INTEGER NOT NULL,
  total_ns     INTEGER NOT NULL,             -- sum of dur_ns
  self_ns      INTEGER NOT NULL,             -- total_ns minus the dur_ns of the ops' direct children
  min_ns       INTEGER NOT NULL,
  max_ns       INTEGER NOT NULL,
  device_ns    INTEGER NOT NULL,             -- sum of device_dur_ns where not NULL
  device_calls INTEGER NOT NULL              -- calls with a device_dur_ns
);
CREATE INDEX op_totals_run ON op_totals(run_id);
