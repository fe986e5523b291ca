// The backend the store's test cases run on. Those tagged [backends] are
// registered twice (tests/CMakeLists.txt): on SQLite files, and again, named
// "postgres: ...", with COLIKV_TEST_BACKEND=postgres on the server whose URI
// is in COLIKV_TEST_PG_URI (tools/dev.sh test starts one: tools/postgres.sh).
// Without a server the postgres runs exit 77, which CTest reports as skipped
// by name; with COLIKV_REQUIRE_PG=1 (CI) they fail instead.
#ifndef COLIKV_TESTS_BACKEND_H
#define COLIKV_TESTS_BACKEND_H

#include <cstdint>
#include <string>
#include <vector>

#include "test_support.h"

namespace colikv_test {

bool testing_postgres();

// The test server's URI; "" when none is configured.
std::string test_pg_uri();

// The location of the store `name` of a test: dir/name, or on PostgreSQL a
// fresh schema of the test server, the same one for the same dir and name.
std::string store_at(const TempDir& dir, const std::string& name);

// A new empty schema on the test server, as a store URI.
std::string fresh_pg_store();

// A new empty schema on the test server named with this process's prefix and
// `suffix` (any characters: it is quoted), dropped when the test case ends.
std::string fresh_pg_schema(const std::string& suffix = "");
// "name" as an SQL identifier, quoted.
std::string quoted_identifier(const std::string& name);
// The URI with a search_path of these schemas (quoted, in this order).
std::string with_search_path(const std::string& uri, const std::vector<std::string>& schemas);

// Plain SQL on a store through a connection of its own (SQLite read-only):
// each row's columns as text, NULL as "". Parameters are `?` in the SQL and
// bound as text; the SQL must mean the same on both backends.
using SqlRows = std::vector<std::vector<std::string>>;
SqlRows store_query(const std::string& location, const std::string& sql, const std::vector<std::string>& params = {});
int64_t store_int(const std::string& location, const std::string& sql, const std::vector<std::string>& params = {});
// A statement that writes (SQLite: read-write, a 5 s busy timeout).
void store_exec(const std::string& location, const std::string& sql, const std::vector<std::string>& params = {});

// Returns once n of the test server's colikv connections wait for a lock
// (pg_stat_activity); fails the test after a minute.
void wait_for_pg_lock_waiters(int n);

// The location with its connections named `name` on the server
// (application_name; the URI's own wins over colikv's "colikv"), so that a
// test can tell one process's sessions from another's; a SQLite location is
// returned as it is.
std::string with_application_name(const std::string& location, const std::string& name);

// Returns once the test server has no session named `name` left. A client
// SIGKILLed after sending a COMMIT is committed by its server session all the
// same, which may end after the kill has returned: a test that reads what
// the killed client left waits for this first. Returns whether any was left
// when it was called; fails the test after a minute.
bool wait_for_pg_sessions_to_end(const std::string& name);

// Chunks no chunk list names: what a writer that died between storing a
// turn's chunks and linking them may leave, and what reclaiming (reopening the
// store, gc) must remove. A store that parks a writer's chunks until its link
// transaction (a held_chunks table naming them by chunk_id), or queues them
// to free after its commit (PostgreSQL's chunks_to_free), may hold those of
// a writer still running: with live_writer they are not counted; without, a
// held or queued chunk counts too.
int64_t orphan_chunks(const std::string& location, bool live_writer);

// Drops every schema this process created on the test server (catch_main.cpp
// does when each test case ends) and checks that none of them is left; returns
// the number of failures, having said what they were.
int drop_test_schemas();

// Called by main before the tests run: 0 to run them, or the exit code
// (77: skipped; 1: a server is required and missing), having said why.
int check_backend_configured();

}  // namespace colikv_test

#endif  // COLIKV_TESTS_BACKEND_H
