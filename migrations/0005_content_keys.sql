-- colikv schema 5: chunks are shared only when their content is equal.
--
-- Up to schema 4 a chunk was stored under its chain hash alone (model,
-- precision and token ids up to its end), so two conversations with the same
-- tokens but different values (another build or backend of the engine,
-- non-deterministic kernels, two fine-tunes with no weights id) shared one
-- chunk and the second loaded the first one's values.
--
-- From this version on, chunks.hash of a chunk this library writes is its key
-- SHA-256("colikv chunk key v1" NUL || chain hash || content digest), the
-- content digest covering its token ids and decoded bytes (docs/format.md).
-- An append reuses a stored chunk only when the keys are equal. The chain
-- hash and the digest are kept in chunk_meta, the narrow side table, for the
-- prefix lookup and for the skip-encoding check.
--
-- Why no table is rebuilt: dropping UNIQUE (model_id, hash) would mean copying
-- every chunk row, blobs included (twice the disk space and a transaction, and
-- a WAL, as large as the store). Changing what new rows put in `hash` needs
-- no copy. A column added to chunks would also sit after the payload, where
-- reading it walks the blob's overflow pages; chunk_meta rows are small.
--
-- Existing chunks (digest NULL) keep their chain hash in `hash` and stay
-- readable, shareable by fork, truncatable; they are never reused for new
-- content, whose key differs. Chunks that schema 4 shared between
-- conversations with different values cannot be repaired (the other values
-- were never stored); `colikv verify` lists the legacy chunks shared by
-- conversations of different fork lineage, whose values were never compared.
--
-- A library of schema 4 refuses this store ("schema version 5 is newer than
-- this library's 4"): it would take keys for chain hashes and fail every load.
ALTER TABLE chunk_meta ADD COLUMN chain_hash BLOB;  -- the chunk's chain hash h[k]
ALTER TABLE chunk_meta ADD COLUMN digest BLOB;      -- content digest; NULL: written before schema 5

UPDATE chunk_meta SET chain_hash = (SELECT ch.hash FROM chunks ch WHERE ch.chunk_id = chunk_meta.chunk_id);

CREATE INDEX chunk_meta_by_chain ON chunk_meta(model_id, chain_hash);
