// colikv/coli_kv.h: the engine's raw .coli_kv file: inspect, read, import, export.
// The format, and inspect_coli_kv, are in colikv/coli_kv_format.h.
#ifndef COLIKV_COLI_KV_H
#define COLIKV_COLI_KV_H

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/coli_kv_format.h"
#include "colikv/export.h"
#include "colikv/store.h"

namespace colikv {

// The conversation id import gives a file by default: its name without the
// directory and without a trailing ".coli_kv" ("slot3.coli_kv" -> "slot3";
// a name that is only ".coli_kv" stays as it is). Touches no file.
COLIKV_API std::string default_conversation_id(const std::string& path);

struct ImportOptions {
  std::string id;          // conversation id; default: default_conversation_id(path)
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

struct ReadColiKvOptions {
  int64_t limit = -1;   // read only the first limit records when 0 <= limit < the count; default all
  ProgressFn progress;  // called with records read / to read after each block; default none
};

// Reads a .coli_kv file's records into the caller's buffers, without a
// store: tokens[0, n) and, for position p, Lc[layer] + p*kv_lora,
// Rc[layer] + p*qk_rope and Ic[layer] + p*index_hd, addressed as Store::load
// addresses them (Ic's non-null layers take the file's indexer planes in
// layer order), where n is the header's record count, or options.limit when
// smaller. Returns n.
// Requires model to have the file's six shape fields (inspect_coli_kv reads
// them; weights_id is not compared: a file has none) and buffers for
// max_tokens positions. Reads a block of records at a time: its memory is a
// few MiB (one record when a record is larger), never sized by the header;
// the caller's buffers bound the rest.
// Throws, as import_coli_kv refuses a file: kInvalidArgument naming the file
// and the problem (short file, wrong magic, bad header field, the header
// counting more records than are present, a token id out of range, not a
// regular file, a NUL byte in path), kNotFound, kIO; also kModelMismatch (the file's shape is not
// model's, naming both), kTooLarge (n > max_tokens), kInvalidArgument (tokens,
// Lc or Rc null, or Ic not non-null for exactly n_indexed layers, with n > 0).
// Nothing is written to the buffers before those header checks pass. A file
// cut meanwhile is kIO ("the file shrank while it was read"); records
// appended meanwhile are not read. After a throw once reading began (kIO, a
// token id out of range), the buffers may hold the records before it.
COLIKV_API int64_t read_coli_kv(const std::string& path, const ModelSignature& model, int32_t* tokens,
                                int64_t max_tokens, const KvTarget& kv,
                                const ReadColiKvOptions& options = ReadColiKvOptions());

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
