-- npuscope trace store, schema version 12: msprobe entries linked to their ops. When
-- npuscope's PrecisionDebugger dumps inside a recording (npuscope.profile, torch_npu.profiler),
-- each dumped call's rows go into the run's trace file too, and the entry names the op it
-- became: an API's own op (aten::conv2d for Functional.conv2d.0.forward), a module's first op,
-- a backward entry's autograd node (autograd::engine::evaluate_function: ...). Its tensors'
-- tensor_dumps rows carry the same op_id. NULL for imported dumps and calls not recorded.
-- docs/schema.md documents the column.

ALTER TABLE dump_entries ADD COLUMN op_id INTEGER;
