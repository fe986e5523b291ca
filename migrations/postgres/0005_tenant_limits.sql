-- colikv's PostgreSQL schema 5: each tenant's own byte budget and retention,
-- as migrations/0008_tenant_limits.sql for SQLite. NULL: none (every
-- existing tenant). A library of PostgreSQL schema 4 refuses this store.
ALTER TABLE tenants ADD COLUMN max_bytes bigint CHECK (max_bytes IS NULL OR max_bytes >= 0);
ALTER TABLE tenants ADD COLUMN max_idle_ms bigint CHECK (max_idle_ms IS NULL OR max_idle_ms >= 0);
