-- colikv schema 8: each tenant's own limits, kept with it in the store so
-- that every process writing for the tenant applies the same ones.
--
-- max_bytes: the tenant's byte budget, in payload bytes of the chunks its
-- conversations link (what `colikv tenants` shows as stored). After an append
-- into the tenant its least recently used conversations are evicted until it
-- fits; other tenants' are never touched. NULL: no quota.
--
-- max_idle_ms: retention. A conversation of the tenant not used for longer
-- than this is deleted whole (row, chunk list, token ids, its chunks nothing
-- else uses) by the next append into the tenant or gc. NULL: kept forever.
--
-- Existing tenants get NULL for both: nothing changes until an operator sets
-- them (`colikv tenant STORE NAME --max-bytes N --max-idle D`). No other row
-- or table changes. A library of schema 7 refuses this store, which it would
-- otherwise fill past its tenants' quotas.
ALTER TABLE tenants ADD COLUMN max_bytes INTEGER CHECK (max_bytes IS NULL OR max_bytes >= 0);
ALTER TABLE tenants ADD COLUMN max_idle_ms INTEGER CHECK (max_idle_ms IS NULL OR max_idle_ms >= 0);
