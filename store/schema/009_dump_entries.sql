-- npuscope trace store, schema version 9: dumps in msprobe's terms. An msprobe dump (imported,
-- or written by npuscope's PrecisionDebugger) names each tensor by its argument's place in the
-- API or module call: `input.0`, `input.0.1` (an element of a list argument), `input.bias` (a
-- keyword argument), `output.0`. tensor_dumps.arg keeps that path; NULL for the dumper's own rows,
-- whose name is `{io}.{idx}`. dump_entries holds one row per dumped call: its module (the
-- parent entry of construct.json) and its Python call stack (stack.json), so a compare can say
-- where the first divergent API was called. docs/schema.md documents every column.

ALTER TABLE tensor_dumps ADD COLUMN arg TEXT;

CREATE TABLE dump_entries (
  id      INTEGER PRIMARY KEY,
  run_id  INTEGER NOT NULL REFERENCES runs(id),
  step    INTEGER,
  name    TEXT NOT NULL,                   -- e.g. Functional.conv2d.0.forward
  parent  TEXT,                            -- the enclosing module's entry, NULL: top level
  stack   TEXT                             -- the call stack: its frames as msprobe writes them, newline-joined
);
CREATE INDEX dump_entries_run ON dump_entries(run_id, name);
