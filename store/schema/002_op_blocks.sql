-- npuscope trace store, schema version 2: op_events loses its two secondary indexes, whose
-- upkeep held the writer to ~400k rows/s; the ops of a run, a thread, a time window or a step
-- range are found through op_blocks instead, a small summary table (one row per few thousand
-- ops) whose rows name ranges of op_events ids. Within one thread, op ids increase with
-- start_ns (ids are taken when an op starts), so a block's rows read in id order are in start
-- order. docs/schema.md documents every column.

CREATE TABLE op_blocks (
  run_id       INTEGER NOT NULL REFERENCES runs(id),
  thread_id    INTEGER NOT NULL,
  first_id     INTEGER NOT NULL,   -- the block's ops have ids in [first_id, last_id] (other
  last_id      INTEGER NOT NULL,   -- threads' ops may lie in between)
  ops          INTEGER NOT NULL,   -- ops of the block
  backward_ops INTEGER NOT NULL,
  min_start_ns INTEGER NOT NULL,
  max_start_ns INTEGER NOT NULL,
  max_end_ns   INTEGER NOT NULL,   -- max(start_ns + dur_ns)
  min_step     INTEGER,            -- NULL when no op of the block is in a step
  max_step     INTEGER
);
CREATE INDEX op_blocks_run_thread ON op_blocks(run_id, thread_id, first_id);

-- Files of schema 1: one block per run and thread (correct, if not selective).
INSERT INTO op_blocks(run_id, thread_id, first_id, last_id, ops, backward_ops, min_start_ns, max_start_ns,
                      max_end_ns, min_step, max_step)
  SELECT run_id, thread_id, min(id), max(id), count(*), sum(is_backward != 0), min(start_ns), max(start_ns),
         max(start_ns + dur_ns), min(step), max(step)
  FROM op_events GROUP BY run_id, thread_id;

DROP INDEX op_events_run_thread_start;
DROP INDEX op_events_run_step;
