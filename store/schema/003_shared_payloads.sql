-- npuscope trace store, schema version 3: a dumped payload is stored once per step. An op's
-- output is usually the next op's input (and a gradient is passed on unchanged), so about half
-- of a full dump's tensors repeat bytes already stored in their step. Such a row keeps its own
-- statistics, dtype and shape, has no data of its own and names the row that holds its bytes in
-- data_ref (an earlier row of the same run and step). docs/schema.md documents every column.

ALTER TABLE tensor_dumps ADD COLUMN data_ref INTEGER REFERENCES tensor_dumps(id);
