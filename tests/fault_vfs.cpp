#include "fault_vfs.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

namespace colikv_test {

namespace {

// One write or truncate since the file's last sync, with what it replaced.
struct Change {
  bool truncate = false;
  int64_t offset = 0;     // write: where; truncate: the new size
  std::string old;        // the bytes it overwrote or cut off
  int64_t old_size = 0;   // the file's size before it
  std::string data;       // write: the bytes written
  int64_t new_size = 0;   // the file's size after it
};

struct State {
  std::mutex mu;
  sqlite3_vfs* real = nullptr;
  int64_t counts[FaultVfs::kOpCount] = {0, 0, 0, 0};
  int64_t mutating = 0;
  int64_t faults = 0;
  int64_t dropped = 0;
  // fail_nth
  int64_t fail_base[FaultVfs::kOpCount] = {0, 0, 0, 0};
  int64_t fail_at[FaultVfs::kOpCount] = {0, 0, 0, 0};  // 0: none
  int fail_code[FaultVfs::kOpCount] = {0, 0, 0, 0};
  bool fail_persistent[FaultVfs::kOpCount] = {false, false, false, false};
  int64_t size_cap = -1;
  // power loss
  int64_t power_base = 0;
  int64_t power_at = 0;  // 0: none
  uint32_t torn_seed = 0;
  bool crashed = false;
  std::map<std::string, std::vector<Change>> unsynced;  // by path
};

State& state() {
  static State* s = new State();  // never destroyed: SQLite may call in at exit
  return *s;
}

struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
  std::string* path;  // null for a temporary file without a name
};

int crash_code(int op) {
  switch (op) {
    case FaultVfs::kRead: return SQLITE_IOERR_READ;
    case FaultVfs::kWrite: return SQLITE_IOERR_WRITE;
    case FaultVfs::kSync: return SQLITE_IOERR_FSYNC;
    default: return SQLITE_IOERR_TRUNCATE;
  }
}

void revert_all_locked(State& s) {
  std::mt19937 rng(s.torn_seed);
  for (auto& [path, changes] : s.unsynced) {
    if (changes.empty()) continue;
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;  // deleted meanwhile: directory entries are not modelled
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
      if (it->truncate) {
        if (::ftruncate(fd, it->old_size) != 0) throw std::runtime_error("fault vfs: ftruncate failed");
        if (!it->old.empty() && ::pwrite(fd, it->old.data(), it->old.size(), it->offset) != static_cast<ssize_t>(it->old.size()))
          throw std::runtime_error("fault vfs: pwrite failed");
      } else {
        if (!it->old.empty() && ::pwrite(fd, it->old.data(), it->old.size(), it->offset) != static_cast<ssize_t>(it->old.size()))
          throw std::runtime_error("fault vfs: pwrite failed");
        if (::ftruncate(fd, it->old_size) != 0) throw std::runtime_error("fault vfs: ftruncate failed");
      }
    }
    int64_t dropped = static_cast<int64_t>(changes.size());
    if (s.torn_seed != 0) {
      // A torn flush: some of the unsynced writes reached the medium.
      for (const Change& c : changes) {
        if ((rng() & 1) == 0) continue;
        --dropped;
        if (c.truncate) {
          if (::ftruncate(fd, c.new_size) != 0) throw std::runtime_error("fault vfs: ftruncate failed");
        } else if (::pwrite(fd, c.data.data(), c.data.size(), c.offset) != static_cast<ssize_t>(c.data.size())) {
          throw std::runtime_error("fault vfs: pwrite failed");
        }
      }
    }
    s.dropped += dropped;
    ::close(fd);
    changes.clear();
  }
  s.crashed = true;
}

// Counts one operation and says whether it fails (with which code) or 0.
int check_locked(State& s, int op) {
  if (s.crashed) return crash_code(op);
  ++s.counts[op];
  if (op != FaultVfs::kRead) {
    ++s.mutating;
    if (s.power_at > 0 && s.mutating - s.power_base == s.power_at) {
      s.power_at = 0;
      ++s.faults;
      revert_all_locked(s);
      return crash_code(op);
    }
  }
  if (s.fail_at[op] > 0) {
    const int64_t seen = s.counts[op] - s.fail_base[op];
    if (seen == s.fail_at[op] || (s.fail_persistent[op] && seen > s.fail_at[op])) {
      ++s.faults;
      return s.fail_code[op];
    }
  }
  return SQLITE_OK;
}

sqlite3_int64 real_size(FaultFile* f) {
  sqlite3_int64 size = 0;
  if (f->real->pMethods->xFileSize(f->real, &size) != SQLITE_OK) return -1;
  return size;
}

std::string read_real(FaultFile* f, int64_t offset, int64_t n) {
  std::string out(static_cast<size_t>(n), '\0');
  if (n > 0) {
    int rc = f->real->pMethods->xRead(f->real, out.data(), static_cast<int>(n), offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) throw std::runtime_error("fault vfs: pre-image read failed");
  }
  return out;
}

// --- sqlite3_io_methods ----------------------------------------------------

int f_close(sqlite3_file* file) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  int rc = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
  delete f->path;
  f->path = nullptr;
  return rc;
}

int f_read(sqlite3_file* file, void* buf, int amt, sqlite3_int64 off) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    int rc = check_locked(s, FaultVfs::kRead);
    if (rc != SQLITE_OK) return rc;
  }
  return f->real->pMethods->xRead(f->real, buf, amt, off);
}

int f_write(sqlite3_file* file, const void* buf, int amt, sqlite3_int64 off) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int rc = check_locked(s, FaultVfs::kWrite);
  if (rc != SQLITE_OK) return rc;
  const sqlite3_int64 size = real_size(f);
  if (size < 0) return SQLITE_IOERR_FSTAT;
  if (s.size_cap >= 0 && off + amt > s.size_cap && off + amt > size) {
    ++s.faults;
    return SQLITE_FULL;
  }
  if (f->path) {
    Change c;
    c.offset = off;
    c.old_size = size;
    c.old = read_real(f, off, std::max<int64_t>(0, std::min<int64_t>(off + amt, size) - off));
    c.data.assign(static_cast<const char*>(buf), static_cast<size_t>(amt));
    c.new_size = std::max<int64_t>(size, off + amt);
    s.unsynced[*f->path].push_back(std::move(c));
  }
  return f->real->pMethods->xWrite(f->real, buf, amt, off);
}

int f_truncate(sqlite3_file* file, sqlite3_int64 size) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int rc = check_locked(s, FaultVfs::kTruncate);
  if (rc != SQLITE_OK) return rc;
  const sqlite3_int64 cur = real_size(f);
  if (cur < 0) return SQLITE_IOERR_FSTAT;
  if (f->path) {
    Change c;
    c.truncate = true;
    c.offset = size;
    c.old_size = cur;
    c.old = read_real(f, size, std::max<int64_t>(0, cur - size));
    c.new_size = size;
    s.unsynced[*f->path].push_back(std::move(c));
  }
  return f->real->pMethods->xTruncate(f->real, size);
}

int f_sync(sqlite3_file* file, int flags) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int rc = check_locked(s, FaultVfs::kSync);
  if (rc != SQLITE_OK) return rc;
  rc = f->real->pMethods->xSync(f->real, flags);
  if (rc == SQLITE_OK && f->path) s.unsynced[*f->path].clear();
  return rc;
}

int f_file_size(sqlite3_file* file, sqlite3_int64* size) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xFileSize(f->real, size);
}
int f_lock(sqlite3_file* file, int l) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xLock(f->real, l);
}
int f_unlock(sqlite3_file* file, int l) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xUnlock(f->real, l);
}
int f_check_reserved(sqlite3_file* file, int* out) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xCheckReservedLock(f->real, out);
}
int f_file_control(sqlite3_file* file, int op, void* arg) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  if (op == SQLITE_FCNTL_VFSNAME) {
    *static_cast<char**>(arg) = sqlite3_mprintf("%s", FaultVfs::kName);
    return SQLITE_OK;
  }
  return f->real->pMethods->xFileControl(f->real, op, arg);
}
int f_sector_size(sqlite3_file* file) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xSectorSize(f->real);
}
int f_device_characteristics(sqlite3_file* file) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xDeviceCharacteristics(f->real);
}
int f_shm_map(sqlite3_file* file, int page, int size, int extend, void volatile** pp) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xShmMap(f->real, page, size, extend, pp);
}
int f_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}
void f_shm_barrier(sqlite3_file* file) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  f->real->pMethods->xShmBarrier(f->real);
}
int f_shm_unmap(sqlite3_file* file, int delete_flag) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  return f->real->pMethods->xShmUnmap(f->real, delete_flag);
}
// Memory-mapped reads would bypass xRead: refuse them.
int f_fetch(sqlite3_file*, sqlite3_int64, int, void** pp) {
  *pp = nullptr;
  return SQLITE_OK;
}
int f_unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

const sqlite3_io_methods kMethods = {
    3,           f_close,       f_read,         f_write,        f_truncate,   f_sync,
    f_file_size, f_lock,        f_unlock,       f_check_reserved, f_file_control, f_sector_size,
    f_device_characteristics,   f_shm_map,      f_shm_lock,     f_shm_barrier, f_shm_unmap,
    f_fetch,     f_unfetch,
};

// --- sqlite3_vfs -------------------------------------------------------------

int v_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  State& s = state();
  auto* f = reinterpret_cast<FaultFile*>(file);
  f->base.pMethods = nullptr;
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + ((sizeof(FaultFile) + 7) & ~size_t{7}));
  f->path = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.crashed) return SQLITE_CANTOPEN;
  }
  int rc = s.real->xOpen(s.real, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    // The unix VFS may leave pMethods set on failure; close it then.
    if (f->real->pMethods) f->real->pMethods->xClose(f->real);
    return rc;
  }
  if (name) f->path = new std::string(name);
  f->base.pMethods = &kMethods;
  return SQLITE_OK;
}

int v_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.crashed) return SQLITE_IOERR_DELETE;
    s.unsynced.erase(name);
  }
  return s.real->xDelete(s.real, name, sync_dir);
}

int v_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return state().real->xAccess(state().real, name, flags, out);
}
int v_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return state().real->xFullPathname(state().real, name, n, out);
}
void* v_dlopen(sqlite3_vfs*, const char* name) { return state().real->xDlOpen(state().real, name); }
void v_dlerror(sqlite3_vfs*, int n, char* msg) { state().real->xDlError(state().real, n, msg); }
void (*v_dlsym(sqlite3_vfs*, void* h, const char* sym))(void) { return state().real->xDlSym(state().real, h, sym); }
void v_dlclose(sqlite3_vfs*, void* h) { state().real->xDlClose(state().real, h); }
int v_randomness(sqlite3_vfs*, int n, char* out) { return state().real->xRandomness(state().real, n, out); }
int v_sleep(sqlite3_vfs*, int us) { return state().real->xSleep(state().real, us); }
int v_current_time(sqlite3_vfs*, double* t) { return state().real->xCurrentTime(state().real, t); }
int v_get_last_error(sqlite3_vfs*, int n, char* msg) { return state().real->xGetLastError(state().real, n, msg); }
int v_current_time_int64(sqlite3_vfs*, sqlite3_int64* t) {
  return state().real->xCurrentTimeInt64(state().real, t);
}

}  // namespace

FaultVfs& FaultVfs::get() {
  static FaultVfs* instance = [] {
    State& s = state();
    s.real = sqlite3_vfs_find(nullptr);
    if (!s.real) throw std::runtime_error("fault vfs: no default SQLite VFS");
    static sqlite3_vfs vfs;
    std::memset(&vfs, 0, sizeof vfs);
    vfs.iVersion = 2;
    vfs.szOsFile = static_cast<int>(((sizeof(FaultFile) + 7) & ~size_t{7}) + static_cast<size_t>(s.real->szOsFile));
    vfs.mxPathname = s.real->mxPathname;
    vfs.zName = kName;
    vfs.xOpen = v_open;
    vfs.xDelete = v_delete;
    vfs.xAccess = v_access;
    vfs.xFullPathname = v_full_pathname;
    vfs.xDlOpen = v_dlopen;
    vfs.xDlError = v_dlerror;
    vfs.xDlSym = v_dlsym;
    vfs.xDlClose = v_dlclose;
    vfs.xRandomness = v_randomness;
    vfs.xSleep = v_sleep;
    vfs.xCurrentTime = v_current_time;
    vfs.xGetLastError = v_get_last_error;
    vfs.xCurrentTimeInt64 = v_current_time_int64;
    if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK) throw std::runtime_error("fault vfs: register failed");
    return new FaultVfs();
  }();
  return *instance;
}

void FaultVfs::reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& c : s.counts) c = 0;
  s.mutating = s.faults = s.dropped = 0;
  for (int i = 0; i < kOpCount; ++i) {
    s.fail_base[i] = s.fail_at[i] = 0;
    s.fail_code[i] = 0;
    s.fail_persistent[i] = false;
  }
  s.size_cap = -1;
  s.power_base = s.power_at = 0;
  s.torn_seed = 0;
  s.crashed = false;
  s.unsynced.clear();
}

int64_t FaultVfs::count(Op op) const {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().counts[op];
}

int64_t FaultVfs::mutating_count() const {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().mutating;
}

int64_t FaultVfs::faults_injected() const {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().faults;
}

void FaultVfs::fail_nth(Op op, int64_t nth, int code, bool persistent) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_base[op] = s.counts[op];
  s.fail_at[op] = nth;
  s.fail_code[op] = code;
  s.fail_persistent[op] = persistent;
}

void FaultVfs::clear_faults() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (int i = 0; i < kOpCount; ++i) s.fail_at[i] = 0;
  s.size_cap = -1;
  s.power_at = 0;
}

void FaultVfs::set_size_cap(int64_t bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().size_cap = bytes;
}

void FaultVfs::power_loss_at(int64_t nth) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.power_base = s.mutating;
  s.power_at = nth;
}

void FaultVfs::power_loss_now() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.crashed) {
    ++s.faults;
    revert_all_locked(s);
  }
}

void FaultVfs::set_torn_seed(uint32_t keep_seed) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().torn_seed = keep_seed;
}

bool FaultVfs::crashed() const {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().crashed;
}

int64_t FaultVfs::dropped_writes() const {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().dropped;
}

}  // namespace colikv_test
