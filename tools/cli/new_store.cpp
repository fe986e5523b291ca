#include "new_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace colikv_cli {

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The name a chain of symbolic links ends at, which need not exist: SQLite
// opens (and creates) the file at the end of the chain.
std::string follow_links(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::vector<char> buf(PATH_MAX + 1);
    const ssize_t n = ::readlink(at.c_str(), buf.data(), buf.size() - 1);
    if (n <= 0) return at;
    const std::string link(buf.data(), static_cast<size_t>(n));
    at = link[0] == '/' ? link : directory_of(at) + "/" + link;
  }
  throw std::runtime_error(path + ": too many levels of symbolic links");
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path of a `file:` URI as SQLite reads it: an optional "//" authority
// (empty or "localhost"), the path up to '?' or '#', %HH escapes decoded.
std::string uri_path(const std::string& uri) {
  std::string rest = uri.substr(5);
  rest = rest.substr(0, rest.find_first_of("?#"));
  if (rest.compare(0, 2, "//") == 0) {
    const size_t slash = rest.find('/', 2);
    const std::string authority = rest.substr(2, slash == std::string::npos ? std::string::npos : slash - 2);
    if (!authority.empty() && authority != "localhost")
      throw std::runtime_error(uri + ": the URI names the host '" + authority + "', not a local file");
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
  if (path.empty()) throw std::runtime_error(uri + ": the URI names no file");
  return path;
}

int64_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// " (N bytes free on its filesystem)", or "" if unknown.
std::string free_space_note(const std::string& dir) {
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) return "";
  return " (" + std::to_string(static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize)) +
         " bytes free on its filesystem)";
}

const char kTempPrefix[] = ".colikv-import-";
const char* const kCompanions[] = {"-wal", "-shm", "-journal"};

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Removes the temporary stores of imports killed midway in dir: an import
// holds an flock on its temporary store (beside SQLite's own fcntl locks,
// which flock does not touch) until it is linked, so one nobody holds is
// left over.
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

}  // namespace

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string store_file_of(const std::string& store_arg) {
  return follow_links(store_arg.compare(0, 5, "file:") == 0 ? uri_path(store_arg) : store_arg);
}

NewStoreFile::NewStoreFile(const std::string& target, int file_mode) : target_(target) {
  const std::string dir = directory_of(target);
  remove_stale_temps(dir);
  for (int attempt = 0; attempt < 8 && held_ < 0; ++attempt) {
    std::string name = dir + "/" + kTempPrefix + "XXXXXX";
    std::vector<char> tmpl(name.begin(), name.end());
    tmpl.push_back('\0');
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw std::runtime_error(target + ": cannot create the store: " + std::strerror(errno));
    temp_ = tmpl.data();
    // Another import's cleanup may have removed it before the lock was taken.
    struct stat mine, now;
    if (::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &mine) == 0 && ::lstat(temp_.c_str(), &now) == 0 &&
        same_file(mine, now)) {
      held_ = fd;
    } else {
      ::close(fd);
    }
  }
  if (held_ < 0) throw std::runtime_error(target + ": cannot keep a temporary store in " + dir);
  // mkstemp's 0600 is the default store mode; a store opened with another
  // Options::file_mode would have been created with that.
  ::fchmod(held_, masked(file_mode));
}

NewStoreFile::~NewStoreFile() {
  if (!published_) ::unlink(temp_.c_str());
  for (const char* suffix : kCompanions) ::unlink((temp_ + suffix).c_str());
  // Closed last, when no Store has the file open any more: closing a
  // descriptor drops every fcntl lock the process holds on the file.
  ::close(held_);
}

bool NewStoreFile::publish() {
  // A WAL left beside the closed store would hold data the linked file lacks:
  // its copy into the store on close failed, for want of space as a rule,
  // since the data takes room twice (WAL and store) until then.
  if (size_of(temp_ + "-wal") > 0)
    throw std::runtime_error(target_ + ": the new store could not take in its data from its WAL" +
                             free_space_note(directory_of(target_)) +
                             "; a new store needs room for its data twice while it is created; nothing was imported");
  if (::link(temp_.c_str(), target_.c_str()) == 0) {
    ::unlink(temp_.c_str());
  } else if (errno == EEXIST) {
    return false;
  } else if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) != 0) {
    // A filesystem without hard links may still rename without replacing.
    if (errno == EEXIST) return false;
    throw std::runtime_error(target_ + ": cannot give the new store its name: " + std::strerror(errno));
  }
  published_ = true;
  sync_directory(directory_of(target_));
  return true;
}

}  // namespace colikv_cli
