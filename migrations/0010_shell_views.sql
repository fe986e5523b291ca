-- colikv schema 10: the views a person reads at the sqlite3 shell, completed.
--
-- The views are kept stable for saved queries: a column is never renamed,
-- removed or given another meaning; new ones are added after the old
-- (docs/format.md, "Views"). conversation_summary keeps every column it had,
-- in the same order, and gains:
--   unique_bytes   payload bytes of the chunks no other conversation uses:
--                  summed over conversations, with each shared chunk once
--                  (model_summary.stored_bytes), it is what the store holds,
--                  where stored_bytes counts a shared chunk in every user;
--   stored_ratio   stored_bytes / raw_bytes (what compression keeps; ratio
--                  stays raw / stored, as it always was);
--   tenant_name    the tenant as people read it: '(default)' for the default
--                  tenant, whose name (the tenant column) is '';
--   metadata       the conversation's metadata JSON;
--   created_utc, updated_utc, last_used_utc
--                  the times in ISO 8601 with their zone ('...T12:34:56.789Z');
--                  created, updated and last_used stay as they were (UTC, no zone).
-- tenant_summary is new: one row per tenant.
--
-- Only views change: no table or row does. A library of schema 9 still
-- refuses this store, as it refuses any newer schema.
DROP VIEW conversation_summary;

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
       strftime('%Y-%m-%d %H:%M:%f', c.last_used_ms / 1000.0, 'unixepoch') AS last_used,
       (SELECT coalesce(sum(length(ch.payload)), 0)
          FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
         WHERE cc.conversation_id = c.conversation_id
           AND NOT EXISTS (SELECT 1 FROM conversation_chunks o
                            WHERE o.chunk_id = cc.chunk_id AND o.conversation_id <> c.conversation_id))
                                                AS unique_bytes,
       round(CAST((SELECT coalesce(sum(length(ch.payload)), 0)
                     FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                    WHERE cc.conversation_id = c.conversation_id) AS REAL) /
             nullif(c.token_count * m.record_bytes, 0), 3) AS stored_ratio,
       CASE WHEN t.name = '' THEN '(default)' ELSE t.name END AS tenant_name,
       c.metadata                               AS metadata,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.created_ms / 1000.0, 'unixepoch')   AS created_utc,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.updated_ms / 1000.0, 'unixepoch')   AS updated_utc,
       strftime('%Y-%m-%dT%H:%M:%fZ', c.last_used_ms / 1000.0, 'unixepoch') AS last_used_utc
  FROM conversations c
  JOIN models m USING (model_id)
  JOIN tenants t USING (tenant_id)
  LEFT JOIN conversations p ON p.conversation_id = c.parent_id;

-- One row per tenant: its conversations, tokens, sizes (tenants share no
-- chunk, so stored_bytes counts each of its chunks once and the tenants' sum
-- is the store's), evicted conversations and limits.
CREATE VIEW tenant_summary AS
SELECT t.name                                   AS tenant,
       CASE WHEN t.name = '' THEN '(default)' ELSE t.name END AS tenant_name,
       (SELECT count(*) FROM conversations c WHERE c.tenant_id = t.tenant_id) AS conversations,
       (SELECT coalesce(sum(c.token_count), 0) FROM conversations c WHERE c.tenant_id = t.tenant_id) AS tokens,
       (SELECT coalesce(sum(c.token_count * m.record_bytes), 0)
          FROM conversations c JOIN models m USING (model_id) WHERE c.tenant_id = t.tenant_id) AS raw_bytes,
       (SELECT coalesce(sum(length(ch.payload)), 0) FROM chunks ch
         WHERE ch.chunk_id IN (SELECT cc.chunk_id FROM conversation_chunks cc
                                 JOIN conversations c USING (conversation_id)
                                WHERE c.tenant_id = t.tenant_id)) AS stored_bytes,
       (SELECT count(*) FROM conversations c
         WHERE c.tenant_id = t.tenant_id
           AND EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                        WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL)) AS evicted_conversations,
       t.max_bytes                              AS max_bytes,
       t.max_idle_ms                            AS max_idle_ms,
       -- The default tenant was made by the migration to schema 7, at time 0: no time.
       CASE WHEN t.created_ms > 0
            THEN strftime('%Y-%m-%dT%H:%M:%fZ', t.created_ms / 1000.0, 'unixepoch') END AS created_utc,
       (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', max(c.last_used_ms) / 1000.0, 'unixepoch')
          FROM conversations c WHERE c.tenant_id = t.tenant_id) AS last_used_utc
  FROM tenants t;
