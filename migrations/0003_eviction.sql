-- colikv schema 3: longest-prefix lookup and KV eviction under a byte budget.

-- One narrow row per chunk, so that neither the prefix lookup nor the byte
-- budget has to read the wide chunk rows (their blobs fill the table's pages):
--  * prev_hash: the chain hash of the chunk before it (X'' for a chunk at
--    position 0; NULL when unknown), so the chunks that follow a given prefix
--    are found in the index below without looking at conversations;
--  * tokens: a copy of chunks.tokens, ordered in that index, so the stored chunk
--    sharing the most leading tokens with a prompt is found by prefix probes;
--  * payload_bytes: length(chunks.payload), 0 once evicted; summed for the budget.
CREATE TABLE chunk_meta (
  chunk_id      INTEGER PRIMARY KEY REFERENCES chunks(chunk_id) ON DELETE CASCADE,
  model_id      INTEGER NOT NULL,
  precision     TEXT    NOT NULL,
  prev_hash     BLOB,
  tokens        TEXT    NOT NULL,
  payload_bytes INTEGER NOT NULL DEFAULT 0 CHECK (payload_bytes >= 0)
);
CREATE INDEX chunk_meta_by_prev ON chunk_meta(model_id, precision, prev_hash, tokens);
CREATE INDEX chunk_meta_by_size ON chunk_meta(payload_bytes);

-- Chunks whose KV data was evicted (payload NULL): only their token ids are kept.
CREATE INDEX chunks_evicted ON chunks(chunk_id) WHERE payload IS NULL;

-- Existing chunks: the predecessor is the chunk one seq earlier in any
-- conversation that uses the chunk (the hash chain makes it the same for all).
INSERT INTO chunk_meta (chunk_id, model_id, precision, prev_hash, tokens, payload_bytes)
SELECT ch.chunk_id, ch.model_id, ch.precision,
       CASE WHEN ch.first_pos = 0 THEN X''
            ELSE (SELECT p.hash
                    FROM conversation_chunks cc
                    JOIN conversation_chunks cp ON cp.conversation_id = cc.conversation_id AND cp.seq = cc.seq - 1
                    JOIN chunks p ON p.chunk_id = cp.chunk_id
                   WHERE cc.chunk_id = ch.chunk_id
                   LIMIT 1) END,
       ch.tokens, coalesce(length(ch.payload), 0)
  FROM chunks ch;

-- conversation_summary gains `evicted`: 1 when some of the conversation's KV
-- data was evicted (its token ids are all kept; re-prefill and append to re-save).
DROP VIEW conversation_summary;
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
       EXISTS (SELECT 1 FROM conversation_chunks cc JOIN chunks ch USING (chunk_id)
                WHERE cc.conversation_id = c.conversation_id AND ch.payload IS NULL) AS evicted,
       c.title                                  AS title,
       p.name                                   AS forked_from,
       strftime('%Y-%m-%d %H:%M:%f', c.created_ms / 1000.0, 'unixepoch')   AS created,
       strftime('%Y-%m-%d %H:%M:%f', c.updated_ms / 1000.0, 'unixepoch')   AS updated,
       strftime('%Y-%m-%d %H:%M:%f', c.last_used_ms / 1000.0, 'unixepoch') AS last_used
  FROM conversations c
  JOIN models m USING (model_id)
  LEFT JOIN conversations p ON p.conversation_id = c.parent_id;
