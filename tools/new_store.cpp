#include "new_store.h"

#include <fcntl.h>
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

mode_t creation_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
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

NewStoreFile::NewStoreFile(const std::string& target) : target_(target) {
  std::string name = directory_of(target) + "/.colikv-import-XXXXXX";
  std::vector<char> tmpl(name.begin(), name.end());
  tmpl.push_back('\0');
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error(target + ": cannot create the store: " + std::strerror(errno));
  temp_ = tmpl.data();
  // SQLite would have created it with the usual mode; mkstemp's is 0600.
  ::fchmod(fd, creation_mode());
  ::close(fd);
}

NewStoreFile::~NewStoreFile() {
  if (!published_) ::unlink(temp_.c_str());
  for (const char* suffix : {"-wal", "-shm", "-journal"}) ::unlink((temp_ + suffix).c_str());
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
