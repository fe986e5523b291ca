// A new store built aside and linked into place (staged_store.h).
#include "sqlite/sqlite_staged_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "colikv/error.h"
#include "core/coli_kv_file.h"
#include "core/path.h"
#include "sqlite/sqlite_checkpointer.h"
#include "sqlite/sqlite_connection.h"

namespace colikv {
namespace detail {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string uri_path(const std::string& uri) {
  std::string rest = uri.substr(5);
  rest = rest.substr(0, rest.find_first_of("?#"));
  if (rest.compare(0, 2, "//") == 0) {
    const size_t slash = rest.find('/', 2);
    const std::string authority = rest.substr(2, slash == std::string::npos ? std::string::npos : slash - 2);
    if (!authority.empty() && authority != "localhost")
      throw Error(ErrorCode::kInvalidArgument,
                  "store " + uri + ": the URI names the host '" + authority + "', not a local file");
    rest = slash == std::string::npos ? "" : rest.substr(slash);
  }
  std::string path;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && hex_value(rest[i + 1]) >= 0 && hex_value(rest[i + 2]) >= 0) {
      path += static_cast<char>(hex_value(rest[i + 1]) * 16 + hex_value(rest[i + 2]));
      i += 2;
    } else {
      path += rest[i];
    }
  }
  if (path.empty()) throw Error(ErrorCode::kInvalidArgument, "store " + uri + ": the URI names no file");
  return path;
}

const char kTempPrefix[] = ".colikv-import-";
const char* const kCompanions[] = {"-wal", "-shm", "-journal", "-writers"};

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Removes the temporary stores of processes killed midway in dir: a staged
// store holds an flock on its file (beside SQLite's own fcntl locks, which
// flock does not touch) until it is linked, so one nobody holds is left over.
void remove_stale_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, sizeof kTempPrefix - 1, kTempPrefix) != 0 || name.find('-', sizeof kTempPrefix - 1) != std::string::npos)
      continue;  // not a temporary store, or one of its companions
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::lstat(path.c_str(), &now) == 0 && same_file(now, held)) {
      for (const char* suffix : kCompanions) ::unlink((path + suffix).c_str());
      ::unlink(path.c_str());
    }
    ::close(fd);
  }
  ::closedir(d);
}

// `mode` less the umask, as open(2) would create a file.
mode_t masked(int mode) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(mode) & 0777 & ~mask;
}

// Makes a new directory entry durable.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// " (N bytes free on its filesystem)", or "" if unknown.
std::string free_space_note(const std::string& file) {
  const int64_t free_bytes = free_bytes_beside(file);
  return free_bytes < 0 ? "" : " (" + std::to_string(free_bytes) + " bytes free on its filesystem)";
}

}  // namespace

std::string sqlite_file_of(const std::string& location) {
  return follow_links(location.compare(0, 5, "file:") == 0 ? uri_path(location) : location);
}

StagedStore::StagedStore(const std::string& location, int file_mode)
    : location_(location), target_(sqlite_file_of(location)) {
  const std::string what = "store " + location;
  check_file_mode(file_mode, what);
  struct stat st;
  if (::lstat(target_.c_str(), &st) == 0)
    throw Error(ErrorCode::kConflict, what + ": exists already; a staged creation (Options::create_staged) only "
                                             "makes a new store, open it without that option");
  refuse_leftover_companions(target_, what);
  const std::string dir = directory_of(target_);
  remove_stale_temps(dir);
  for (int attempt = 0; attempt < 8 && held_ < 0; ++attempt) {
    const std::string name = dir + "/" + kTempPrefix + "XXXXXX";
    std::vector<char> tmpl(name.begin(), name.end());
    tmpl.push_back('\0');
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) coli_kv_file::throw_errno(what + ": cannot create it in directory " + dir, errno);
    temp_ = tmpl.data();
    // Another staged creation's sweep may have removed it before the lock was taken.
    struct stat mine, now;
    if (::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &mine) == 0 && ::lstat(temp_.c_str(), &now) == 0 &&
        same_file(mine, now)) {
      held_ = fd;
    } else {
      ::close(fd);
    }
  }
  if (held_ < 0) throw Error(ErrorCode::kIO, what + ": cannot keep a temporary store in " + dir);
  // mkstemp's 0600 is the default store mode; a store opened with another
  // Options::file_mode would have been created with that.
  ::fchmod(held_, masked(file_mode));
}

StagedStore::~StagedStore() {
  if (!published_) ::unlink(temp_.c_str());
  for (const char* suffix : kCompanions) ::unlink((temp_ + suffix).c_str());
  // Closed last, when no connection has the file open any more: closing a
  // descriptor drops every fcntl lock the process holds on the file.
  ::close(held_);
}

std::string StagedStore::named(const std::string& message) const {
  std::string s = message;
  for (size_t at = s.find(temp_); !temp_.empty() && at != std::string::npos; at = s.find(temp_, at + location_.size()))
    s.replace(at, temp_.size(), location_);
  return s;
}

void StagedStore::publish() {
  const std::string what = "store " + location_;
  // A WAL left beside the closed store would hold data the linked file lacks:
  // its copy into the store on close failed, for want of space as a rule,
  // since the data takes room twice (WAL and store) until then.
  if (file_size_or_zero(temp_ + "-wal") > 0)
    throw Error(ErrorCode::kDiskFull, what + ": the new store could not take in its data from its WAL" +
                                          free_space_note(target_) +
                                          "; a new store needs room for its data twice while it is created; "
                                          "nothing was stored");
  // Checked again: one may have appeared while the store was built (and
  // link() would not see it).
  refuse_leftover_companions(target_, what);
  if (::link(temp_.c_str(), target_.c_str()) == 0) {
    ::unlink(temp_.c_str());
  } else if (errno == EEXIST) {
    throw Error(ErrorCode::kConflict, what + ": a file of that name appeared while the new store was built; it "
                                             "was left as it is, and the new store discarded");
  } else if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) != 0) {
    // A filesystem without hard links may still rename without replacing.
    if (errno == EEXIST)
      throw Error(ErrorCode::kConflict, what + ": a file of that name appeared while the new store was built; it "
                                               "was left as it is, and the new store discarded");
    coli_kv_file::throw_errno(what + ": cannot give the new store its name", errno);
  }
  published_ = true;
  sync_directory(directory_of(target_));
}

}  // namespace detail
}  // namespace colikv
