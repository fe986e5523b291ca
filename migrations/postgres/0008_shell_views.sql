-- colikv's PostgreSQL schema 8: the views a person reads at psql, completed
-- as migrations/0010_shell_views.sql completes SQLite's. Views stay stable
-- for saved queries: columns are only added, after the old ones
-- (docs/format.md, "Views"). conversation_summary gains unique_bytes,
-- stored_ratio (stored / raw; ratio stays raw / stored), tenant_name
-- ('(default)' for the tenant ''), metadata and the times as ISO 8601 text
-- with their zone (created_utc, updated_utc, last_used_utc; created, updated
-- and last_used stay timestamps with time zone). tenant_summary is new.
-- No table or row changes; a library of PostgreSQL schema 7 refuses this store.
CREATE OR REPLACE VIEW conversation_summary AS
SELECT c.name                                   AS conversation,
       m.signature                              AS model,
       c.token_count                            AS tokens,
       c.precision                              AS precision,
       c.token_count * m.record_bytes           AS raw_bytes,
       (SELECT coalesce(sum(octet_length(ch.payload)), 0)
          FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
         WHERE cc.conversation_id = c.conversation_id) AS stored_bytes,
       round((c.token_count * m.record_bytes)::numeric /
             nullif((SELECT sum(octet_length(ch.payload))
                       FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                      WHERE cc.conversation_id = c.conversation_id), 0), 3) AS ratio,
       EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL) AS evicted,
       c.title                                  AS title,
       p.name                                   AS forked_from,
       to_timestamp(c.created_ms / 1000.0)      AS created,
       to_timestamp(c.updated_ms / 1000.0)      AS updated,
       to_timestamp(c.last_used_ms / 1000.0)    AS last_used,
       t.name                                   AS tenant,
       (SELECT coalesce(sum(octet_length(ch.payload)), 0)
          FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
         WHERE cc.conversation_id = c.conversation_id
           AND NOT EXISTS (SELECT 1 FROM conversation_chunks o
                            WHERE o.chunk_id = cc.chunk_id AND o.conversation_id <> c.conversation_id))
                                                AS unique_bytes,
       round((SELECT coalesce(sum(octet_length(ch.payload)), 0)
                FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
               WHERE cc.conversation_id = c.conversation_id)::numeric /
             nullif(c.token_count * m.record_bytes, 0), 3) AS stored_ratio,
       CASE WHEN t.name = '' THEN '(default)' ELSE t.name END AS tenant_name,
       c.metadata                               AS metadata,
       to_char(to_timestamp(c.created_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')   AS created_utc,
       to_char(to_timestamp(c.updated_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')   AS updated_utc,
       to_char(to_timestamp(c.last_used_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_used_utc
  FROM conversations c
  JOIN models m USING (model_id)
  JOIN tenants t ON t.tenant_id = c.tenant_id
  LEFT JOIN conversations p ON p.conversation_id = c.parent_id;

CREATE OR REPLACE VIEW tenant_summary AS
SELECT t.name                                   AS tenant,
       CASE WHEN t.name = '' THEN '(default)' ELSE t.name END AS tenant_name,
       (SELECT count(*) FROM conversations c WHERE c.tenant_id = t.tenant_id) AS conversations,
       (SELECT coalesce(sum(c.token_count), 0) FROM conversations c WHERE c.tenant_id = t.tenant_id) AS tokens,
       (SELECT coalesce(sum(c.token_count * m.record_bytes), 0)
          FROM conversations c JOIN models m USING (model_id) WHERE c.tenant_id = t.tenant_id) AS raw_bytes,
       (SELECT coalesce(sum(octet_length(ch.payload)), 0) FROM chunks ch
         WHERE ch.chunk_id IN (SELECT cc.chunk_id FROM conversation_chunks cc
                                 JOIN conversations c USING (conversation_id)
                                WHERE c.tenant_id = t.tenant_id)) AS stored_bytes,
       (SELECT count(*) FROM conversations c
         WHERE c.tenant_id = t.tenant_id
           AND EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                        WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL)) AS evicted_conversations,
       t.max_bytes                              AS max_bytes,
       t.max_idle_ms                            AS max_idle_ms,
       CASE WHEN t.created_ms > 0
            THEN to_char(to_timestamp(t.created_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END
                                                AS created_utc,
       (SELECT to_char(to_timestamp(max(c.last_used_ms) / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
          FROM conversations c WHERE c.tenant_id = t.tenant_id) AS last_used_utc
  FROM tenants t;

-- A store whose tenants were granted to roles (row-level security on): the
-- views read as the role querying them, and its roles may read the new one,
-- as colikv tenant --grant sets up (src/postgres/pg_tenant_roles.cpp).
DO $$
DECLARE
  r record;
BEGIN
  IF (SELECT relrowsecurity FROM pg_class WHERE oid = 'conversations'::regclass) THEN
    EXECUTE 'ALTER VIEW conversation_summary SET (security_invoker = true)';
    EXECUTE 'ALTER VIEW tenant_summary SET (security_invoker = true)';
    FOR r IN SELECT DISTINCT role_oid FROM tenant_roles LOOP
      EXECUTE format('GRANT SELECT ON tenant_summary TO %I', pg_get_userbyid(r.role_oid));
    END LOOP;
  END IF;
END $$;
