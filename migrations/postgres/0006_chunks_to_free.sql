-- colikv's PostgreSQL schema 6: chunks a writer freed but could not lock.
--
-- A writer that unlinks chunks (truncate, rm, a replaced tail, retention)
-- deletes those no chunk list names. Another writer's open turn may hold one
-- of them (it found it to share, FOR SHARE, or links it, KEY SHARE): waiting
-- for it inside the freeing transaction can close a cycle of waits with that
-- writer, which the server breaks by failing one of them. So the freer skips
-- what it cannot lock at once and queues it here, in the same transaction;
-- after its commit, and on every writable open, gc and vacuum, a writer frees
-- the queued chunks that no chunk list names by then and drops their rows
-- (src/postgres/pg_catalog.cpp, free_queued_chunks). verify does not report
-- a queued chunk as unused: it is on its way out.
--
-- A library of PostgreSQL schema 5 refuses this store: it would wait for
-- such chunks instead, and never free what another host queued.
CREATE TABLE chunks_to_free (
  chunk_id      bigint  NOT NULL PRIMARY KEY,  -- no foreign key: the chunk may be gone already
  tenant_id     bigint  NOT NULL               -- the freer's tenant, for its role's policy
);

CREATE POLICY chunks_to_free_own ON chunks_to_free
  USING (tenant_id IN (SELECT tenant_id FROM tenant_roles))
  WITH CHECK (tenant_id IN (SELECT tenant_id FROM tenant_roles));

-- A store whose tenants were granted to roles before this migration: the
-- new table is under the policy too, and those roles may use it.
DO $$
DECLARE
  r record;
BEGIN
  IF (SELECT relrowsecurity FROM pg_class WHERE oid = 'chunks'::regclass) THEN
    ALTER TABLE chunks_to_free ENABLE ROW LEVEL SECURITY;
    FOR r IN SELECT DISTINCT quote_ident(g.rolname::text) AS q
               FROM tenant_roles t JOIN pg_roles g ON g.oid = t.role_oid LOOP
      EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON chunks_to_free TO ' || r.q;
    END LOOP;
  END IF;
END $$;
