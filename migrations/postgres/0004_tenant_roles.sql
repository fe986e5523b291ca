-- colikv's PostgreSQL schema 4: a server role per tenant, with row-level
-- security (docs/postgres.md, "One role per tenant").
--
-- Every content row now knows its tenant, so that a policy can keep it from
-- the roles of other tenants: chunks and chunk_meta get tenant_id (the write
-- path sets it; here it is taken from the conversations that link the chunk,
-- and stays NULL, no tenant's, for a chunk no conversation links: only the
-- owner sees those, and gc frees them). A chunk list row's tenant is its
-- conversation's. tenant_roles records which role may use which tenant.
--
-- Nothing changes for a store that never grants a tenant: the policies below
-- are inert until Store::grant_tenant (colikv tenant --grant) enables row-level
-- security on the tables, and the owner (and a superuser, or a role with
-- BYPASSRLS) always sees every row. A role granted some tenants sees only
-- theirs, whatever it runs (psql included); see docs/postgres.md for what
-- that isolates and what it does not.
--
-- The content key of a chunk is unique per tenant, (model_id, hash,
-- tenant_id) instead of (model_id, hash): a tenant's role that computes
-- another tenant's key for a guessed prompt gets no unique violation that
-- would tell it that the other tenant stored that prompt. The keys never
-- collided across tenants anyway (a tenant's name is in its chain hashes).
--
-- A library of PostgreSQL schema 3 refuses this store: it would store chunks
-- without their tenant, which a tenant's role could then not read.
ALTER TABLE chunks ADD COLUMN tenant_id bigint REFERENCES tenants(tenant_id);
UPDATE chunks ch SET tenant_id = u.tenant_id
  FROM (SELECT cc.chunk_id, min(c.tenant_id) AS tenant_id
          FROM conversation_chunks cc JOIN conversations c ON c.conversation_id = cc.conversation_id
         GROUP BY cc.chunk_id) u
 WHERE u.chunk_id = ch.chunk_id;
ALTER TABLE chunks DROP CONSTRAINT chunks_model_id_hash_key;
ALTER TABLE chunks ADD CONSTRAINT chunks_model_hash_tenant_key UNIQUE (model_id, hash, tenant_id);

ALTER TABLE chunk_meta ADD COLUMN tenant_id bigint;
UPDATE chunk_meta k SET tenant_id = ch.tenant_id FROM chunks ch
 WHERE ch.chunk_id = k.chunk_id AND ch.tenant_id IS NOT NULL;

-- role_oid, not the name: a role renamed keeps its tenants, and a role of
-- the same name made after one was dropped gets none of them.
CREATE TABLE tenant_roles (
  tenant_id     bigint  NOT NULL REFERENCES tenants(tenant_id),
  role_oid      oid     NOT NULL,
  granted_ms    bigint  NOT NULL,
  PRIMARY KEY (tenant_id, role_oid)
);

-- The tenants of the current role: those granted to a role whose privileges
-- it has (itself, or a group role it inherits). Through pg_roles, so that a
-- row left by a dropped role is skipped instead of failing pg_has_role.
CREATE POLICY tenant_roles_own ON tenant_roles
  USING (role_oid IN (SELECT oid FROM pg_roles WHERE pg_has_role(oid, 'USAGE')));
CREATE POLICY tenants_own ON tenants
  USING (tenant_id IN (SELECT tenant_id FROM tenant_roles));
CREATE POLICY conversations_own ON conversations
  USING (tenant_id IN (SELECT tenant_id FROM tenant_roles))
  WITH CHECK (tenant_id IN (SELECT tenant_id FROM tenant_roles));
-- INSERT ... RETURNING needs the new row to pass the USING part too: it does,
-- since the row's tenant is the role's.
CREATE POLICY chunks_own ON chunks
  USING (tenant_id IN (SELECT tenant_id FROM tenant_roles))
  WITH CHECK (tenant_id IN (SELECT tenant_id FROM tenant_roles));
CREATE POLICY chunk_meta_own ON chunk_meta
  USING (tenant_id IN (SELECT tenant_id FROM tenant_roles))
  WITH CHECK (tenant_id IN (SELECT tenant_id FROM tenant_roles) AND
              EXISTS (SELECT 1 FROM chunks ch WHERE ch.chunk_id = chunk_meta.chunk_id
                         AND ch.tenant_id = chunk_meta.tenant_id));
-- A link may name only a chunk of its conversation's tenant: a role could
-- otherwise link another tenant's chunk id into its own list and load it.
CREATE POLICY conversation_chunks_own ON conversation_chunks
  USING (EXISTS (SELECT 1 FROM conversations c WHERE c.conversation_id = conversation_chunks.conversation_id))
  WITH CHECK (EXISTS (SELECT 1 FROM conversations c JOIN chunks ch ON ch.tenant_id = c.tenant_id
                       WHERE c.conversation_id = conversation_chunks.conversation_id
                         AND ch.chunk_id = conversation_chunks.chunk_id));
