-- colikv schema 9: objects first. A turn of more than one new chunk stores
-- each chunk in a short write transaction of its own before the one
-- transaction that links them (so another writer takes the lock between
-- two chunks), and records it here as held by its writer until that link.
--
-- A held chunk that no chunk list names is invisible to every read (it has
-- no chunk_meta row until its link, and verify, stats and the byte budget
-- skip it); a chunk a writer holds is never freed or evicted while that
-- writer may still link it. A writer that died before its link leaves its
-- held rows: the next writable open, gc or vacuum deletes the chunks of
-- writers certainly dead on this machine (docs/design.md, "Objects first").
--
-- writers: one row per Store that held a chunk, with what tells whether its
-- process still runs: the kernel's boot id, the pid namespace (the link
-- text of /proc/self/ns/pid), the pid, and the process start time (clock
-- ticks since boot, /proc/self/stat field 22).
--
-- No existing row changes: an older store gains two empty tables. A library
-- of schema 8 refuses this store, which it would otherwise read with another
-- writer's unlinked chunks counted as unused.
CREATE TABLE writers (
  writer_id   INTEGER PRIMARY KEY,
  boot_id     TEXT    NOT NULL,
  pid_ns      TEXT    NOT NULL,
  pid         INTEGER NOT NULL,
  start_ticks INTEGER NOT NULL,
  created_ms  INTEGER NOT NULL
);
CREATE TABLE held_chunks (
  chunk_id  INTEGER NOT NULL,
  writer_id INTEGER NOT NULL REFERENCES writers(writer_id),
  PRIMARY KEY (chunk_id, writer_id)
) WITHOUT ROWID;
-- No index by writer: held_chunks holds at most the turns in flight, and
-- only a dropped turn or a reclaim looks rows up by writer.
