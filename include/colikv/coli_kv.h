// colikv/coli_kv.h: the engine's raw .coli_kv file: inspect, import, export.
//
// Format (little-endian): 8 bytes magic "COLIKV1\0"; eight int32: n_layers,
// kv_lora, qk_rope, index_hd, n_indexed, vocab, nrec, 0; then records of
// record_bytes each: int32 token, then per layer kv_lora floats and qk_rope
// floats, then index_hd floats per indexed layer. Only the first nrec records
// are content; bytes after them are left over from a truncate or a torn append.
#ifndef COLIKV_COLI_KV_H
#define COLIKV_COLI_KV_H

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/export.h"
#include "colikv/store.h"

namespace colikv {

constexpr int64_t kColiKvHeaderBytes = 40;

// What inspect_coli_kv found, without importing.
struct ColiKvInspection {
  std::string path;
  int64_t file_bytes = 0;
  bool header_read = false;       // magic and 8 header fields present
  ModelSignature model;           // from the header (weights_id empty)
  int64_t header_count = 0;       // nrec field
  int64_t record_bytes = 0;       // 0 when the header is invalid
  int64_t records_on_disk = 0;    // complete records present after the header
  int64_t trailing_bytes = 0;     // bytes after the last complete record
  std::vector<int32_t> first_tokens;   // up to the requested number, of the counted records
  std::vector<std::string> problems;   // every problem found; empty when well-formed
  bool ok() const { return problems.empty(); }
};

// Reads the header and scans the token ids of the counted records (checking
// each is in [0, vocab)). Throws Error(kNotFound/kIO) only when the file cannot
// be opened or read (kIO too when it shrinks meanwhile), kInvalidArgument when
// it is not a regular file (a FIFO, a device, a directory); every format
// problem goes into problems.
COLIKV_API ColiKvInspection inspect_coli_kv(const std::string& path, int first_tokens = 16);

struct ImportOptions {
  std::string id;          // conversation id; default: the file name without directory and ".coli_kv"
  std::string weights_id;  // weights identity to record in the model signature; default ""
  // Keep the complete records when the header counts more than are present,
  // as the engine itself would; default false (such a file is refused).
  bool salvage = false;
  ProgressFn progress;     // called with tokens done / total; default none
};

struct ImportResult {
  std::string id;
  ModelSignature model;
  int64_t tokens = 0;            // records stored
  int64_t header_count = 0;      // the header's nrec
  int64_t ignored_records = 0;   // complete records past nrec, not content
  int64_t ignored_bytes = 0;     // bytes past nrec records (records and partial tail)
  bool salvaged = false;         // nrec exceeded the records present and salvage kept them
};

// Imports a whole file as a new conversation in one transaction: either all of
// it is stored or nothing. Streams: memory stays bounded whatever the size.
// Throws kInvalidArgument naming the file and the problem (short file, wrong
// magic, bad header field, missing records, token id out of range, not a
// regular file), kConflict when the id exists, kReadOnly, kDiskFull, kIO
// (also when the file shrinks meanwhile).
COLIKV_API ImportResult import_coli_kv(Store& store, const std::string& path,
                            const ImportOptions& options = ImportOptions());

struct ExportOptions {
  bool force = false;   // overwrite an existing file; default false (kConflict)
  ProgressFn progress;  // default none
};

// Writes the conversation as a .coli_kv file, byte for byte what the engine
// would have written, through a temporary file in the directory of path
// (".colikv-export-XXXXXX", held under an flock while it is written) that is
// fsynced and renamed over path (then the directory is fsynced), so a crash
// never leaves a partial file under path; such files left by an export that
// was killed are removed by the next export into that directory. A symbolic
// link at path is kept and the file it leads to replaced. The temporary file
// is 0600 while it is written; the finished file gets the mode the engine's
// own .coli_kv files get (0666 less the process's umask). Refuses
// (kInvalidArgument) a path that is the store's own database, WAL, shared-
// memory or journal file (by device and inode, or by name) and one that is
// not a regular file (a FIFO, a device, a directory); refuses (kConflict) a
// dangling symbolic link, and any existing file unless options.force.
// Returns the bytes written.
COLIKV_API int64_t export_coli_kv(Store& store, const std::string& id, const std::string& path,
                       const ExportOptions& options = ExportOptions());

// The same bytes written in order to an open file descriptor (a pipe, a
// terminal's redirection, standard output), with no temporary file; a failed
// export leaves a partial stream. Refuses (kInvalidArgument) a descriptor
// open on one of the store's own files. Returns the bytes written.
COLIKV_API int64_t export_coli_kv_to_fd(Store& store, const std::string& id, int fd,
                                        const ExportOptions& options = ExportOptions());

}  // namespace colikv

#endif  // COLIKV_COLI_KV_H
