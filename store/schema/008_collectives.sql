-- npuscope trace store, schema version 8: the collectives of a multi-rank job. Each rank records
-- its own run; runs.job names the job its ranks share, and every collective the `hccl` process
-- group ran is a row with the time it was enqueued and the time this rank saw it complete, so a
-- cluster report can tell communication from computing and waiting. `seq` numbers a process
-- group's collectives in call order: the same collective has the same (grp, seq) on every rank.
-- docs/schema.md documents every column.

ALTER TABLE runs ADD COLUMN job TEXT;      -- the job a rank's run belongs to, NULL: not known

CREATE TABLE collectives (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id),
  step       INTEGER,
  op_id      INTEGER,                      -- op_events.id of the hcom_* op that enqueued it
  grp        INTEGER NOT NULL,             -- the process group, numbered in creation order
  seq        INTEGER NOT NULL,             -- the group's n-th collective (from 1)
  kind       TEXT NOT NULL,                -- allreduce | broadcast | allgather | reduce_scatter | ...
  bytes      INTEGER NOT NULL,             -- this rank's input (send) bytes
  dtype      TEXT,
  group_size INTEGER NOT NULL,
  start_ns   INTEGER NOT NULL,             -- enqueued
  end_ns     INTEGER                       -- completed as seen by this rank; NULL: it never did
);
CREATE INDEX collectives_run ON collectives(run_id, step);
