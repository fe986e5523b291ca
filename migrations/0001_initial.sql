-- colikv schema 1: models, conversations, chunks and each conversation's chunk list.
-- Applied in one transaction; PRAGMA user_version is set to 1 by the runner.

-- One row per model signature (the six .coli_kv header fields + weights identity).
CREATE TABLE models (
  model_id      INTEGER PRIMARY KEY,
  signature     TEXT    NOT NULL UNIQUE,   -- canonical text, e.g. 'n_layers=78 kv_lora=512 ...'
  n_layers      INTEGER NOT NULL CHECK (n_layers > 0),
  kv_lora       INTEGER NOT NULL CHECK (kv_lora > 0),
  qk_rope       INTEGER NOT NULL CHECK (qk_rope > 0),
  index_hd      INTEGER NOT NULL CHECK (index_hd >= 0),
  n_indexed     INTEGER NOT NULL CHECK (n_indexed >= 0 AND n_indexed <= n_layers),
  vocab         INTEGER NOT NULL CHECK (vocab > 0),
  weights_id    TEXT    NOT NULL DEFAULT '',
  record_bytes  INTEGER NOT NULL,          -- bytes of one .coli_kv record (token + vectors)
  chunk_tokens  INTEGER NOT NULL CHECK (chunk_tokens > 0),  -- positions per full chunk
  created_ms    INTEGER NOT NULL
);

-- One row per conversation.
CREATE TABLE conversations (
  conversation_id INTEGER PRIMARY KEY,
  name          TEXT    NOT NULL UNIQUE,   -- the caller's id
  model_id      INTEGER NOT NULL REFERENCES models(model_id),
  token_count   INTEGER NOT NULL DEFAULT 0 CHECK (token_count >= 0),  -- committed tokens
  precision     TEXT    NOT NULL DEFAULT 'f32',
  title         TEXT    NOT NULL DEFAULT '',
  metadata      TEXT    NOT NULL DEFAULT '{}',  -- JSON text
  parent_id     INTEGER REFERENCES conversations(conversation_id) ON DELETE SET NULL,
  forked_at     INTEGER NOT NULL DEFAULT 0,     -- tokens taken from the parent
  generation    INTEGER NOT NULL DEFAULT 0,     -- bumped by every write; detects racing writers
  created_ms    INTEGER NOT NULL,
  updated_ms    INTEGER NOT NULL,
  last_used_ms  INTEGER NOT NULL
);
CREATE INDEX conversations_by_last_used ON conversations(last_used_ms DESC, conversation_id DESC);

-- The records of a run of positions [first_pos, first_pos + n_tokens), as one blob.
-- Content-addressed: hash = SHA-256 chained over the model, the precision and
-- every token id up to the chunk's end, so equal prefixes share their chunks.
CREATE TABLE chunks (
  chunk_id      INTEGER PRIMARY KEY,
  model_id      INTEGER NOT NULL REFERENCES models(model_id),
  hash          BLOB    NOT NULL,          -- 32 bytes
  first_pos     INTEGER NOT NULL CHECK (first_pos >= 0),
  n_tokens      INTEGER NOT NULL CHECK (n_tokens > 0),
  tokens        TEXT    NOT NULL,          -- JSON array of the n_tokens token ids
  precision     TEXT    NOT NULL DEFAULT 'f32',
  compression   TEXT    NOT NULL CHECK (compression IN ('zstd', 'none')),
  raw_size      INTEGER NOT NULL,          -- bytes of the payload once decompressed
  checksum      INTEGER NOT NULL,          -- CRC-32C of token ids (int32 LE) then decompressed payload
  payload       BLOB,                      -- shuffled planes, zstd-compressed only when smaller
  UNIQUE (model_id, hash)
);

-- The ordered chunk list of each conversation: chunk seq covers positions
-- [seq * chunk_tokens, seq * chunk_tokens + n_tokens).
CREATE TABLE conversation_chunks (
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  seq             INTEGER NOT NULL CHECK (seq >= 0),
  chunk_id        INTEGER NOT NULL REFERENCES chunks(chunk_id),
  PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE INDEX conversation_chunks_by_chunk ON conversation_chunks(chunk_id);
