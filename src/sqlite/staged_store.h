// A new SQLite store built under a temporary name and given its name only
// once it is whole (Options::create_staged, Store::publish).
//
// The store is built as ".colikv-import-XXXXXX" in its directory (the name
// `colikv import` gave it before the library did this, so that the files of
// an old tool's killed import are swept too), closed, which folds its WAL
// into it, and only then hard-linked to its name: link() fails when the name
// appeared meanwhile, the atomic check a rename lacks. A failure removes only
// the temporary files, which no other process knows of, so a store another
// process created meanwhile is never undone. Not installed.
#ifndef COLIKV_SRC_SQLITE_STAGED_STORE_H
#define COLIKV_SRC_SQLITE_STAGED_STORE_H

#include <string>

namespace colikv {
namespace detail {

// The file a SQLite store location leads to: a `file:` URI decoded to its
// path as SQLite reads it (an empty or "localhost" authority, the path up to
// '?' or '#', %HH escapes decoded; the query is not read), then symbolic
// links followed to the name they end at (which may not exist). Throws
// kInvalidArgument for a URI that names another host or no file, or a loop
// of links.
std::string sqlite_file_of(const std::string& location);

class StagedStore {
 public:
  // Creates the temporary store file for `location` (its directory's stale
  // temporary stores removed first: those no live process holds an flock
  // on), with the permission bits file_mode less the umask. Throws
  // kInvalidArgument as sqlite_file_of does, kConflict when the location's
  // file exists already (nothing is touched), kNotFound for a missing
  // directory, kIO when no temporary file can be made there.
  StagedStore(const std::string& location, int file_mode);
  // Removes the temporary store and its -wal, -shm and -journal unless
  // publish() gave it its name. Must run after every connection to path()
  // is closed: closing the held descriptor drops this process's fcntl locks
  // on the file.
  ~StagedStore();
  StagedStore(const StagedStore&) = delete;
  StagedStore& operator=(const StagedStore&) = delete;

  // The temporary store file, to be opened as the store.
  const std::string& path() const { return temp_; }
  // message with every mention of path() replaced by the location: what a
  // caller named is what an error names.
  std::string named(const std::string& message) const;

  // Gives the closed store its name, never replacing a file. Throws
  // kConflict when a file of that name appeared meanwhile, kDiskFull when
  // the store's WAL could not be folded into it at close (its data is not
  // all in the file), kIO when the name cannot be given; the temporary files
  // are then removed by the destructor and nothing has the location's name.
  void publish();

 private:
  std::string location_;
  std::string target_;
  std::string temp_;
  int held_ = -1;  // open on temp_ under an flock: the store is being built
  bool published_ = false;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_SQLITE_STAGED_STORE_H
