-- npuscope trace store, schema version 10: memory by owner. With memory recording on, every
-- device block that was live while a run recorded has one row in memory_blocks: when it was
-- allocated and freed (the pool's event numbers, which order all allocations and frees of a
-- device exactly, and times), its sizes, what it holds (category: 0 untagged, 1 parameter, 2 master_weight, 3 gradient,
-- 4 optimizer_state, 5 activation, 6 cast_cache, 7 temporary, 8 dump_staging, 9 other) and the
-- op that allocated it. The blocks live at any event number add up to the pool's allocated
-- bytes then. memory_devices keeps each device's peak as the recorder saw it, memory_ooms the
-- allocations a device refused. docs/schema.md documents every column; docs/memory.md the
-- categories and how untagged blocks get theirs.

CREATE TABLE memory_blocks (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  device    INTEGER NOT NULL,
  alloc_seq INTEGER NOT NULL,              -- the pool's event number of the allocation (the run's first, for older blocks)
  free_seq  INTEGER,                       -- of the free; NULL: live when recording stopped
  alloc_ns  INTEGER NOT NULL,              -- when allocated (recording's start, for older blocks)
  free_ns   INTEGER,
  size      INTEGER NOT NULL,              -- bytes the pool counts (rounded)
  requested INTEGER NOT NULL,              -- bytes asked for
  category  INTEGER NOT NULL,               -- see above
  op_id     INTEGER,                       -- the allocating op (op_events.id), NULL: none recorded
  step      INTEGER,                       -- the step it was allocated in, NULL: none
  address   INTEGER NOT NULL,
  owner     TEXT                           -- who tagged it ("fc.weight", "NpuFusedAdam exp_avg"), NULL: none
);
CREATE INDEX memory_blocks_run ON memory_blocks(run_id, device, alloc_seq);

CREATE TABLE memory_devices (
  run_id         INTEGER NOT NULL REFERENCES runs(id),
  device         INTEGER NOT NULL,
  start_seq      INTEGER NOT NULL,         -- the pool's event number when recording started
  end_seq        INTEGER NOT NULL,         -- and when it stopped
  peak_seq       INTEGER,                  -- the event of the highest allocated bytes while steps were kept
  peak_ns        INTEGER,
  peak_allocated INTEGER,
  peak_reserved  INTEGER,                  -- reserved bytes at that event
  largest_cached INTEGER,                  -- the largest free cached block then
  peak_op_id     INTEGER,                  -- the op allocating at the peak, NULL: none
  peak_step      INTEGER,
  capacity       INTEGER NOT NULL
);

CREATE TABLE memory_ooms (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  device    INTEGER NOT NULL,
  seq       INTEGER NOT NULL,              -- the pool's last event before the refused request
  ts_ns     INTEGER NOT NULL,
  requested INTEGER NOT NULL,
  op_id     INTEGER,                       -- the op that asked, NULL: none recorded
  step      INTEGER,
  message   TEXT NOT NULL                  -- the one-line error the allocation returned
);
