// Creating a store for `colikv import` without ever deleting a file another
// process may hold.
//
// A store the import creates is built under a temporary name beside the
// store (".colikv-import-XXXXXX" in its directory), closed (which folds its
// WAL into it), and only then hard-linked to the store's name: link() fails
// when the name appeared meanwhile, the atomic check a rename lacks. So a
// failed import removes only its own temporary files, which no other process
// knows of, and a racing import that created the store first is never undone.
#ifndef COLIKV_TOOLS_CLI_NEW_STORE_H
#define COLIKV_TOOLS_CLI_NEW_STORE_H

#include <string>

namespace colikv_cli {

// The file a store argument leads to: a `file:` URI decoded to its path,
// symbolic links followed to the name they end at (which may not exist).
// Throws std::runtime_error for a URI that names no local file.
std::string store_file_of(const std::string& store_arg);

bool file_exists(const std::string& path);

// A new store's file under a temporary name in the directory of `target`;
// its files are removed on destruction unless publish() linked it. Such files
// left by an import that was killed are removed by the next import that
// creates a store in that directory. Must outlive every Store open on path().
class NewStoreFile {
 public:
  // file_mode: the store's Options::file_mode (masked by the umask).
  NewStoreFile(const std::string& target, int file_mode);
  ~NewStoreFile();
  NewStoreFile(const NewStoreFile&) = delete;
  NewStoreFile& operator=(const NewStoreFile&) = delete;

  const std::string& path() const { return temp_; }

  // Gives the closed store its name. Returns false, and leaves the target
  // alone, when a file of that name appeared meanwhile.
  bool publish();

 private:
  std::string target_;
  std::string temp_;
  int held_ = -1;  // open on temp_ under an flock: the import is alive
  bool published_ = false;
};

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_NEW_STORE_H
