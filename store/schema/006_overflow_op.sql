-- npuscope trace store, schema version 6: an overflow event can name the op it happened in. With
-- float-status tracking on, the first op of each step whose result overflowed is recorded
-- (source 'first_op') with its op_events id. docs/schema.md documents every column.

ALTER TABLE overflow_events ADD COLUMN op_id INTEGER;  -- op_events.id of the op, NULL: not known
