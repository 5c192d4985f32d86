-- npuscope trace store, schema version 7: an op can be a point where the host waits for the
-- device (a copy to the host, `.item()`, a synchronisation, a float-status read). The predicted
-- host/device timeline (docs/device.md, "Predicted timeline") makes the host wait there.
-- docs/schema.md documents every column.

ALTER TABLE op_events ADD COLUMN host_sync INTEGER;  -- 1: the host waits for the device here; NULL: no
