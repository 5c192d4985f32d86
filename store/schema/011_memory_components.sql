-- npuscope trace store, schema version 11: device memory by CANN component. torch_npu's
-- npu_module_mem.csv (and its database export's NPU_MODULE_MEM) samples the memory each
-- component of the device software reserves: APP (the framework's allocator and what the
-- application asked for), HCCL, RUNTIME, GE, SLOG and some seventy others, most of them empty.
-- An imported run keeps every sample of a component that reserved anything; a recorded run
-- writes none (its pool is the memory table). docs/schema.md documents the columns.

CREATE TABLE memory_components (
  run_id    INTEGER NOT NULL REFERENCES runs(id),
  device    INTEGER NOT NULL,
  component TEXT NOT NULL,                 -- CANN's name: APP, HCCL, RUNTIME, GE, SLOG ...
  ts_ns     INTEGER NOT NULL,
  reserved  INTEGER NOT NULL               -- bytes
);
CREATE INDEX memory_components_run ON memory_components(run_id, device, component, ts_ns);
