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
};

struct CopyResult {
  std::string id;
  ModelSignature model;
  int64_t tokens = 0;
  // SHA-256 (hex) of the conversation's .coli_kv records as read back from
  // the source and from the destination after the copy: equal, or copy threw.
  std::string records_sha256;
};

// Copies conversation `id` of `src` into `dst` under the same id, with its
// model (and its chunk size, when dst does not know the model yet),
// precision, title and metadata, in one transaction of dst (all of it
// or nothing), from one read snapshot of src; memory stays a few chunks
// whatever its size. Chunks equal to ones dst holds are stored once there
// (the content rule of dst). Then reads both back and compares their records
// byte for byte. Throws kConflict when dst has the id, kEvicted when some of
// the source's KV data was evicted, kCorrupt when the copies differ. Fork
// parents and timestamps are not carried (dst records the copy's time).
COLIKV_API CopyResult copy_conversation(Store& src, Store& dst, const std::string& id,
                                        const CopyOptions& options = CopyOptions());

}  // namespace colikv

#endif  // COLIKV_COPY_H
