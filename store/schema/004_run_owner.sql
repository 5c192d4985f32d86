-- npuscope trace store, schema version 4: a run knows the process recording it (pid and host),
-- so a writer opening the file later can end, as failed, a run whose process is gone without
-- ending it (killed, crashed, or out of disk). docs/schema.md documents every column.

ALTER TABLE runs ADD COLUMN pid INTEGER;
ALTER TABLE runs ADD COLUMN host TEXT;
