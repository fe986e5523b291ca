-- colikv's PostgreSQL schema 2: as migrations/0006_tail_pieces.sql for
-- SQLite, a conversation's tail may be held in several pieces
-- (docs/format.md, "Chunk lists"). No table changes: a schema-1 store is
-- valid as it is. A library of PostgreSQL schema 1 refuses this store
-- ("schema version 2 is newer than this library's 1"): it would report a
-- conversation whose tail has two pieces as corrupt.
-- chunk_meta.prev_hash and chunk_meta.tokens index a tail piece by the tail
-- up to its end, after the last full chunk's chain hash (docs/format.md,
-- "chunk_meta"); a schema-1 partial chunk already is such a row.
COMMENT ON COLUMN chunk_meta.prev_hash IS
  'The chain hash at the chunk boundary at or before the chunk (a tail piece: after the last full chunk), empty at position 0';
COMMENT ON COLUMN chunk_meta.tokens IS
  'The token ids from that boundary to the chunk''s end (a tail piece: the tail up to its end)';
COMMENT ON TABLE conversation_chunks IS
  'A conversation''s chunk list: seq is an ordinal; full chunks, then up to 32 tail pieces (docs/format.md)';
