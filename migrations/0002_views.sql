-- colikv schema 2: views for a person at the sqlite3 shell.

-- One row per conversation: what it is, how long, how big, when.
CREATE VIEW conversation_summary AS
SELECT c.name                                   AS conversation,
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
       c.title                                  AS title,
       p.name                                   AS forked_from,
       strftime('%Y-%m-%d %H:%M:%f', c.created_ms / 1000.0, 'unixepoch')   AS created,
       strftime('%Y-%m-%d %H:%M:%f', c.updated_ms / 1000.0, 'unixepoch')   AS updated,
       strftime('%Y-%m-%d %H:%M:%f', c.last_used_ms / 1000.0, 'unixepoch') AS last_used
  FROM conversations c
  JOIN models m USING (model_id)
  LEFT JOIN conversations p ON p.conversation_id = c.parent_id;

-- One row per committed position: conversation, position, token id.
CREATE VIEW conversation_tokens AS
SELECT c.name                      AS conversation,
       ch.first_pos + CAST(j.key AS INTEGER) AS position,
       j.value                     AS token
  FROM conversations c
  JOIN conversation_chunks cc ON cc.conversation_id = c.conversation_id
  JOIN chunks ch ON ch.chunk_id = cc.chunk_id,
       json_each(ch.tokens) j;

-- Per model: conversations, tokens, raw bytes, and stored bytes counting each
-- shared chunk once.
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
