-- colikv schema 7: tenants, the sharing domains of one store.
--
-- A conversation belongs to exactly one tenant; ids are unique within it
-- (UNIQUE (tenant_id, name) replaces UNIQUE (name)). Tenant 0, named '', is
-- the default: every existing conversation moves into it with every column
-- unchanged, and its chunks keep their hashes.
--
-- Chunks carry no tenant column: a tenant other than '' mixes its name into
-- the chain hash's seed (so into every chunk key), and chunk_meta.prev_hash of
-- a region at position 0 is the tenant's anchor instead of X''
-- (docs/format.md, "Tenants"). Equal tokens and values in two tenants thus
-- give two chunks, and neither the dedup by key nor the prefix lookup can
-- reach the other tenant's. No chunk row changes.
--
-- SQLite cannot drop a UNIQUE constraint: conversations is rebuilt (its rows
-- are small; the chunk tables are not touched). The runner applies this with
-- foreign key enforcement off, as SQLite's table-rebuild procedure requires,
-- and checks conversations' keys before committing. The views that read
-- conversations are dropped first and made again, with a tenant column.
--
-- A library of schema 6 refuses this store ("schema version 7 is newer than
-- this library's 6"): it would find conversations of any tenant by id alone.
CREATE TABLE tenants (
  tenant_id     INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL UNIQUE CHECK (length(CAST(name AS BLOB)) <= 255),
  created_ms    INTEGER NOT NULL
);
INSERT INTO tenants (tenant_id, name, created_ms) VALUES (0, '', 0);

DROP VIEW conversation_summary;
DROP VIEW conversation_tokens;
DROP VIEW model_summary;

CREATE TABLE conversations_v7 (
  conversation_id INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL,          -- the caller's id, unique within its tenant
  model_id      INTEGER NOT NULL REFERENCES models(model_id),
  token_count   INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),
  precision     TEXT    NOT NULL DEFAULT 'f32',
  title         TEXT    NOT NULL DEFAULT '',
  metadata      TEXT    NOT NULL DEFAULT '{}',
  parent_id     INTEGER REFERENCES conversations_v7(conversation_id) ON DELETE SET NULL,
  forked_at     INTEGER NOT NULL DEFAULT 0,
  generation    INTEGER NOT NULL DEFAULT 0,
  created_ms    INTEGER NOT NULL,
  updated_ms    INTEGER NOT NULL,
  last_used_ms  INTEGER NOT NULL,
  tenant_id     INTEGER NOT NULL DEFAULT 0 REFERENCES tenants(tenant_id),
  UNIQUE (tenant_id, name)
);
INSERT INTO conversations_v7 (conversation_id, name, model_id, token_count, precision, title, metadata, parent_id,
                              forked_at, generation, created_ms, updated_ms, last_used_ms, tenant_id)
SELECT conversation_id, name, model_id, token_count, precision, title, metadata, parent_id,
       forked_at, generation, created_ms, updated_ms, last_used_ms, 0
  FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_v7 RENAME TO conversations;
CREATE INDEX conversations_by_last_used ON conversations(last_used_ms DESC, conversation_id DESC);
-- A tenant's most recently used conversations (list, match) without reading
-- the other tenants' rows.
CREATE INDEX conversations_by_tenant_last_used ON conversations(tenant_id, last_used_ms DESC, conversation_id DESC);

CREATE VIEW conversation_summary AS
SELECT t.name                                   AS tenant,
       c.name                                   AS conversation,
       m.signature                              AS model,
       c.token_count                            AS tokens,
       c.precision                              AS precision,
       c.token_count * m.record_bytes           AS raw_bytes,
       (SELECT coalesce(sum(length(ch.payload)), 0)
          FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
         WHERE cc.conversation_id = c.conversation_id) AS stored_bytes,
       round(CAST(c.token_count * m.record_bytes AS REAL) /
             nullif((SELECT sum(length(ch.payload))
                       FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                      WHERE cc.conversation_id = c.conversation_id), 0), 3) AS ratio,
       EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL) AS evicted,
       c.title                                  AS title,
       p.name                                   AS forked_from,
       strftime('%Y-%m-%d %H:%M:%f', c.created_ms / 1000.0, 'unixepoch')   AS created,
       strftime('%Y-%m-%d %H:%M:%f', c.updated_ms / 1000.0, 'unixepoch')   AS updated,
       strftime('%Y-%m-%d %H:%M:%f', c.last_used_ms / 1000.0, 'unixepoch') AS last_used
  FROM conversations c
  JOIN models m USING (model_id)
  JOIN tenants t USING (tenant_id)
  LEFT JOIN conversations p ON p.conversation_id = c.parent_id;

CREATE VIEW conversation_tokens AS
SELECT t.name                      AS tenant,
       c.name                      AS conversation,
       ch.first_pos + CAST(j.key AS INTEGER) AS position,
       j.value                     AS token
  FROM conversations c
  JOIN tenants t USING (tenant_id)
  JOIN conversation_chunks cc ON cc.conversation_id = c.conversation_id
  JOIN chunks ch ON ch.chunk_id = cc.chunk_id,
       json_each(ch.tokens) j;

CREATE VIEW model_summary AS
SELECT m.signature AS model,
       m.chunk_tokens AS chunk_tokens,
       (SELECT count(*) FROM conversations c WHERE c.model_id = m.model_id) AS conversations,
       (SELECT coalesce(sum(token_count), 0) FROM conversations c WHERE c.model_id = m.model_id) AS tokens,
       (SELECT coalesce(sum(token_count), 0) FROM conversations c WHERE c.model_id = m.model_id)
         * m.record_bytes AS raw_bytes,
       (SELECT count(*) FROM chunks ch WHERE ch.model_id = m.model_id) AS chunks,
       (SELECT coalesce(sum(length(payload)), 0) FROM chunks ch WHERE ch.model_id = m.model_id) AS stored_bytes
  FROM models m;
