// colikv/copy.h: copying conversations from one store to another (SQLite to
// PostgreSQL and back): how an operator moves a store onto a server.
#ifndef COLIKV_COPY_H
#define COLIKV_COPY_H

#include <cstdint>
#include <string>

#include "colikv/export.h"
#include "colikv/model.h"
#include "colikv/store.h"

namespace colikv {

struct CopyOptions {
  ProgressFn progress;  // tokens done / total of the conversation; default none
  // When dst has the id already: leave it and report skipped if it holds the
  // same conversation (model, precision, token ids, the values a load gives),
  // else fail with kConflict saying what differs. So a copy that stopped
  // part way can be run again. Default: an existing id is kConflict.
  bool skip_existing = false;
};

struct CopyResult {
  std::string id;
  ModelSignature model;
  int64_t tokens = 0;
  // SHA-256 (hex) of the conversation's .coli_kv records up to evicted_from
  // (all when none), as read back from the source and from the destination
  // after the copy: equal, or copy threw.
  std::string records_sha256;
  // The first position whose KV values the copy lacks, as they were evicted
  // in the source (the copy may lack them from the start of a chunk that
  // spans evicted positions); -1 when it holds them all.
  int64_t evicted_from = -1;
  bool skipped = false;  // skip_existing found the same conversation in dst: nothing written
};

// Copies conversation `id` of `src` into `dst` under the same id, with its
// model (and its chunk size, when dst does not know the model yet),
// precision, title and metadata, in one transaction of dst (all of it
// or nothing), from one read snapshot of src; memory stays a few chunks
// whatever its size. Chunks equal to ones dst holds are stored once there
// (the content rule of dst). A conversation whose KV data was evicted is
// copied as it is: its rows, metadata and every token id, the evicted values
// missing in dst too (a load there is kEvicted; an append re-saves it).
// Then reads both back and compares their records byte for byte up to the
// first evicted position. Throws kConflict when dst has the id (unless
// skip_existing finds it equal), kCorrupt when the copies differ. Fork
// parents and timestamps are not carried (dst records the copy's time).
COLIKV_API CopyResult copy_conversation(Store& src, Store& dst, const std::string& id,
                                        const CopyOptions& options = CopyOptions());

}  // namespace colikv

#endif  // COLIKV_COPY_H
