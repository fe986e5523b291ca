#include "store/write/async_writer.h"

#include <sys/mman.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/chunk_codec.h"
#include "store/kv_planes.h"
#include "core/store_limits.h"

namespace colikv {
namespace detail {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kSpareBuffers = 2;  // recycled staging buffers kept while idle

// The bytes a StagingBuffer of floats faults in: whole huge pages.
size_t staging_bytes(size_t floats) {
  return std::max(kHugePage, (floats * sizeof(float) + kHugePage - 1) / kHugePage * kHugePage);
}

// Copies n floats with stores that bypass the cache where the CPU has them:
// a turn's rows are far larger than the cache, and a plain copy first reads
// every destination line it then overwrites (slower: docs/benchmarks.md).
void stream_copy(float* dst, const float* src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 16 <= n; i += 16) {
    const __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
    const __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);
    _mm_stream_ps(dst + i, a);
    _mm_stream_ps(dst + i + 4, b);
    _mm_stream_ps(dst + i + 8, c);
    _mm_stream_ps(dst + i + 12, d);
  }
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();  // the streamed stores are visible before the copy is reported done
#else
  std::memcpy(dst, src, n * sizeof(float));
#endif
}

}  // namespace

// ---------------------------------------------------------------------------
// Staging buffers

StagingBuffer::StagingBuffer(size_t floats, const Progress& between_pages) {
  // Rounded up to whole huge pages: fewer TLB misses while the engine's thread
  // copies, and the memory is faulted in here, once, not during that copy.
  const size_t bytes = staging_bytes(floats);
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (!p) throw std::bad_alloc();
  data_.reset(static_cast<float*>(p));
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
  for (size_t at = 0; at < bytes; at += kHugePage) {
    std::memset(static_cast<char*>(p) + at, 0, kHugePage);
    if (between_pages && !between_pages(at + kHugePage)) {
      data_.reset();
      return;
    }
  }
  capacity_ = bytes / sizeof(float);
}

void StagingBuffer::Free::operator()(float* p) const { std::free(p); }

QueuedAppend::Source QueuedAppend::source() const {
  Source s;
  const PlaneList planes = packed_planes(model, rows.data(), len - staged_from);
  for (int l = 0; l < model.n_layers; ++l) {
    s.lc.push_back(planes[2 * l].base);
    s.rc.push_back(planes[2 * l + 1].base);
    // Indexed planes go to the first n_indexed layers: only their order matters.
    s.ic.push_back(l < model.n_indexed ? planes[2 * model.n_layers + l].base : nullptr);
  }
  s.kv.Lc = s.lc.data();
  s.kv.Rc = s.rc.data();
  s.kv.Ic = s.ic.data();
  return s;
}

// ---------------------------------------------------------------------------
// The writer

namespace {

// The reserved buffer's floats: whole huge pages (as a StagingBuffer rounds
// its size), never past the queue's bound; 0 when not even one fits.
size_t reserve_floats(int64_t max_bytes, int64_t reserve_bytes) {
  const int64_t bytes = std::min(max_bytes, reserve_bytes);
  if (bytes < static_cast<int64_t>(kHugePage)) return 0;
  return static_cast<size_t>(bytes) / kHugePage * kHugePage / sizeof(float);
}

}  // namespace

AsyncWriter::AsyncWriter(int64_t max_bytes, int64_t reserve_bytes, ThreadPool& pool, CommitFn commit,
                         ReadStateFn read_state)
    : max_bytes_(max_bytes),
      reserve_floats_(reserve_floats(max_bytes, reserve_bytes)),
      pool_(pool),
      commit_(std::move(commit)),
      read_state_(std::move(read_state)) {}

void AsyncWriter::prepare() {
  LockGuard<Mutex> lock(mu_);
  if (prepared_ || stopping_) return;
  prepared_ = true;
  // Only while the writer has no buffer yet: later turns recycle theirs.
  if (reserve_floats_ == 0 || thread_.joinable() || !spare_.empty()) return;
  reserving_ = true;
  reserver_ = std::thread([this] { reserve_spare(); });
}

AsyncWriter::~AsyncWriter() {
  {
    LockGuard<Mutex> lock(mu_);
    paused_ = false;
    stopping_ = true;
  }
  cancel_reserve_ = true;  // a Store closed before its first turn does not wait for the faults
  changed_.notify_all();
  if (reserver_.joinable()) reserver_.join();
  if (thread_.joinable()) thread_.join();
}

void AsyncWriter::start_thread() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

size_t AsyncWriter::enqueue(const std::string& id, const ModelSignature& model, const int32_t* tokens, int64_t len,
                          const KvSource& kv, const std::string& here) {
  LockGuard<Mutex> lock(mu_);
  Conversation& conv = claim(id, model);
  // Released on every way out: the next enqueue of this conversation may go.
  struct Release {
    AsyncWriter& w;
    Conversation& c;
    ~Release() {
      c.copying = false;
      w.changed_.notify_all();
    }
  } release{*this, conv};
  if (conv.error) throw *conv.error;  // the queue of this conversation is broken until a wait reports it
  const int64_t committed = validate(*conv.expected, model, tokens, len, here);
  if (len == committed) return 0;

  QueuedAppend job;
  job.id = id;
  job.model = model;
  job.tokens.assign(tokens, tokens + len);
  job.from = committed;
  job.len = len;
  const int64_t chunk = std::max<int64_t>(conv.expected->chunk_tokens, 1);
  job.staged_from = committed / chunk * chunk;
  if (conv.expected->evicted_from >= 0)  // re-saved from the engine's rows: the stored ones are gone
    job.staged_from = std::min(job.staged_from, conv.expected->evicted_from / chunk * chunk);
  const size_t floats = static_cast<size_t>((len - job.staged_from) * model.floats_per_token());
  job.bytes = static_cast<int64_t>(floats * sizeof(float));
  reserve(job.bytes);
  try {
    if (conv.error) throw *conv.error;  // an earlier turn failed while this one waited for room
    // A turn the reserved buffer holds waits for it while what is left to fault of it costs no more than faulting
    // a buffer of the turn's own (which would also double the memory). A turn smaller than what is left faults its
    // own: waiting would hold the caller's thread for the rest of the reservation, and an engine that reads its next
    // request only once a turn is saved would hold that request too.
    if (floats <= reserve_floats_ && reserving_ &&
        reserve_floats_ * sizeof(float) - std::min(reserve_faulted_.load(), reserve_floats_ * sizeof(float)) <=
            staging_bytes(floats))
      while (reserving_) changed_.wait(mu_);
    job.rows = take_buffer(floats);
  } catch (...) {
    queued_bytes_ -= job.bytes;
    throw;
  }
  // The copy runs without the lock: the writer keeps committing meanwhile.
  if (!conv.expected) conv.expected.emplace();
  conv.expected->exists = true;
  conv.expected->model = model;
  conv.expected->tokens = job.tokens;
  conv.expected->evicted_from = -1;  // this turn re-saves them
  ++conv.pending;
  mu_.unlock();
  try {
    copy_rows(model, kv, job.staged_from, len - job.staged_from, job.rows.data());
  } catch (...) {
    mu_.lock();
    queued_bytes_ -= job.bytes;
    --conv.pending;
    conv.expected.reset();
    throw;
  }
  mu_.lock();
  job.queued_at = std::chrono::steady_clock::now();
  queue_.push_back(std::move(job));
  start_thread();
  return queue_.size() + (busy_ ? 1 : 0);
}

// Turns of one conversation queued from several threads go one at a time,
// from validation to queueing, so that they are queued in the order they were
// validated; the claim holds while this one waits for room or copies.
AsyncWriter::Conversation& AsyncWriter::claim(const std::string& id, const ModelSignature& model) {
  for (;;) {
    while (conversations_[id].copying) changed_.wait(mu_);
    expected_for(id, model);  // may let the lock go while it reads the store
    Conversation& conv = conversations_[id];
    if (conv.copying || !conv.expected) continue;  // another thread came in meanwhile
    conv.copying = true;
    return conv;
  }
}

// The caller's turn against what is stored or queued; returns that length.
int64_t AsyncWriter::validate(const ExpectedState& expected, const ModelSignature& model, const int32_t* tokens,
                              int64_t len, const std::string& here) const {
  if (expected.exists && expected.model != model)
    throw Error(ErrorCode::kModelMismatch, here + ": stored for model [" + expected.model.to_string() +
                                               "], but the caller's model is [" + model.to_string() + "]");
  const int64_t committed = static_cast<int64_t>(expected.tokens.size());
  if (len < committed)
    throw Error(ErrorCode::kInvalidArgument, here + ": append of " + std::to_string(len) +
                                                 " tokens is shorter than the " + std::to_string(committed) +
                                                 " committed or queued; truncate first");
  for (int64_t p = 0; p < committed; ++p)
    if (tokens[p] != expected.tokens[static_cast<size_t>(p)])
      throw Error(ErrorCode::kDiverged,
                  here + ": the caller's token at position " + std::to_string(p) + " is " + std::to_string(tokens[p]) +
                      " but the stored or queued one is " + std::to_string(expected.tokens[static_cast<size_t>(p)]) +
                      "; truncate to " + std::to_string(p) + " before appending",
                  p);
  for (int64_t p = committed; p < len; ++p)
    if (tokens[p] < 0 || tokens[p] >= model.vocab)
      throw Error(ErrorCode::kInvalidArgument, here + ": token id " + std::to_string(tokens[p]) + " at position " +
                                                   std::to_string(p) + " is outside [0, " +
                                                   std::to_string(model.vocab) + ")");
  return committed;
}

ExpectedState& AsyncWriter::expected_for(const std::string& id, const ModelSignature& model) {
  if (!conversations_[id].expected) {
    // Read without our lock: it takes the Store's, which the writer holds while committing.
    mu_.unlock();
    ExpectedState read;
    try {
      read = read_state_(id, model);
    } catch (...) {
      mu_.lock();
      throw;
    }
    mu_.lock();
    Conversation& conv = conversations_[id];
    if (!conv.expected) conv.expected = std::move(read);
  }
  return *conversations_[id].expected;
}

void AsyncWriter::reserve(int64_t bytes) {
  // A turn larger than the bound alone still goes, once nothing else is queued.
  if (queued_bytes_ != 0 && queued_bytes_ + bytes > max_bytes_) {
    ++blocked_enqueues_;
    while (queued_bytes_ != 0 && queued_bytes_ + bytes > max_bytes_) changed_.wait(mu_);
    --blocked_enqueues_;
  }
  queued_bytes_ += bytes;
}

StagingBuffer AsyncWriter::take_buffer(size_t floats) {
  for (size_t i = 0; i < spare_.size(); ++i)
    if (spare_[i].capacity() >= floats) {
      StagingBuffer b = std::move(spare_[i]);
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
      return b;
    }
  spare_.clear();  // too small for this model's turns: freed, not hoarded
  return StagingBuffer(floats);
}

// Copies plane after plane; a pool worker takes planes too when one is free
// (the pool may be encoding an earlier turn: then this thread copies them all).
void AsyncWriter::copy_rows(const ModelSignature& m, const KvSource& kv, int64_t from, int64_t n, float* dst) {
  struct Shared {
    PlaneList src, dst;
    size_t rows = 0;
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    void copy_some() {
      for (size_t p = next++; p < src.size(); p = next++) {
        stream_copy(dst[p].base, src[p].base, rows * static_cast<size_t>(dst[p].width));
        ++done;
      }
    }
  };
  auto shared = std::make_shared<Shared>();
  shared->src = engine_planes(m, kv, from);
  shared->dst = packed_planes(m, dst, n);
  shared->rows = static_cast<size_t>(n);
  if (pool_.size() > 1) pool_.submit([shared] { shared->copy_some(); });
  shared->copy_some();
  // A plane the worker took may still be in flight: the engine may overwrite its buffers once this returns.
  while (shared->done.load() < shared->src.size()) std::this_thread::yield();
}

// The first staging buffer, faulted in on the reserving thread, while the
// engine is still computing its next turn; kept as a spare one (within the bound).
void AsyncWriter::reserve_spare() {
  StagingBuffer reserved;
  try {
    reserved = StagingBuffer(reserve_floats_, [this](size_t faulted) {
      reserve_faulted_ = faulted;
      while (reserve_held_ && !cancel_reserve_) {
        reserve_stopped_ = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      reserve_stopped_ = false;
      return !cancel_reserve_;
    });
  } catch (const std::bad_alloc&) {
    // Nothing reserved: the first turn allocates its own, as without a reserve.
  }
  LockGuard<Mutex> lock(mu_);
  if (reserved.data()) {
    // Smaller spares (of a first turn that came meanwhile with a buffer of its own) give way to it.
    spare_.erase(std::remove_if(spare_.begin(), spare_.end(),
                                [&](const StagingBuffer& b) { return b.capacity() < reserved.capacity(); }),
                 spare_.end());
    int64_t spare_bytes = 0;
    for (const StagingBuffer& b : spare_) spare_bytes += static_cast<int64_t>(b.bytes());
    // A larger first turn may have come meanwhile with a buffer of its own: the spares stay within the bound.
    if (spare_.size() < kSpareBuffers &&
        queued_bytes_ + spare_bytes + static_cast<int64_t>(reserved.bytes()) <= max_bytes_)
      spare_.insert(spare_.begin(), std::move(reserved));
  }
  reserving_ = false;
  changed_.notify_all();
}

void AsyncWriter::run() {
  LockGuard<Mutex> lock(mu_);
  for (;;) {
    while (!((!queue_.empty() && !paused_) || (stopping_ && queue_.empty()))) changed_.wait(mu_);
    if (queue_.empty()) return;  // stopping, everything committed
    QueuedAppend job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    std::optional<Error> error;
    if (conversations_[job.id].error) {
      error = conversations_[job.id].error;  // an earlier turn failed: this one is dropped
    } else {
      mu_.unlock();
      try {
        commit_(job);
      } catch (const Error& e) {
        error = e;
      } catch (const std::bad_alloc&) {
        error = Error(ErrorCode::kInternal, "out of memory committing a queued append of '" + job.id + "'");
      } catch (const std::exception& e) {
        error = Error(ErrorCode::kInternal, std::string("internal error: ") + e.what());
      }
      mu_.lock();
    }
    finish(job, error);
    busy_ = false;
    changed_.notify_all();
  }
}

void AsyncWriter::finish(QueuedAppend& job, const std::optional<Error>& error) {
  Conversation& conv = conversations_[job.id];
  --conv.pending;
  queued_bytes_ -= job.bytes;
  if (error) {
    if (!conv.error) {
      conv.error = error;
      conv.error_order = ++failures_;
    }
    conv.expected.reset();  // the store holds the last good turn: read it again after the wait
  }
  // Kept for the next turns while the bound allows it; a burst of turns does
  // not leave its buffers behind, only enough for an engine's next two.
  int64_t spare_bytes = 0;
  for (const StagingBuffer& b : spare_) spare_bytes += static_cast<int64_t>(b.bytes());
  if (spare_.size() < kSpareBuffers &&
      queued_bytes_ + spare_bytes + static_cast<int64_t>(job.rows.bytes()) <= std::max(max_bytes_, job.bytes))
    spare_.push_back(std::move(job.rows));
}

bool AsyncWriter::idle(const std::string* id) const {
  if (id) {
    auto it = conversations_.find(*id);
    return it == conversations_.end() || it->second.pending == 0;
  }
  for (const auto& entry : conversations_)
    if (entry.second.pending > 0) return false;  // a turn being copied counts, not only the queue
  return true;
}

void AsyncWriter::wait_idle(const std::string* id) {
  if (idle(id)) return;
  ++blocked_waits_;
  while (!idle(id)) changed_.wait(mu_);
  --blocked_waits_;
}

void AsyncWriter::wait(const std::string* id) {
  LockGuard<Mutex> lock(mu_);
  wait_idle(id);
  std::optional<Error> first;
  uint64_t first_order = 0;
  for (auto& [name, conv] : conversations_) {
    if (id && name != *id) continue;
    if (conv.error && (!first || conv.error_order < first_order)) {
      first = std::move(conv.error);
      first_order = conv.error_order;
    }
    conv.error.reset();
  }
  if (first) throw *first;
}

void AsyncWriter::drain(const std::string* id) {
  LockGuard<Mutex> lock(mu_);
  wait_idle(id);
  for (auto& [name, conv] : conversations_)
    if (!id || name == *id) conv.expected.reset();
}

void AsyncWriter::pause(bool paused) {
  {
    LockGuard<Mutex> lock(mu_);
    paused_ = paused;
  }
  changed_.notify_all();
}

int64_t AsyncWriter::queued_bytes() const {
  LockGuard<Mutex> lock(mu_);
  return queued_bytes_;
}

int AsyncWriter::blocked_enqueues() const {
  LockGuard<Mutex> lock(mu_);
  return blocked_enqueues_;
}

size_t AsyncWriter::spare_buffers() const {
  LockGuard<Mutex> lock(mu_);
  return spare_.size();
}

void AsyncWriter::hold_reserve(bool held) { reserve_held_ = held; }

std::vector<std::pair<const float*, size_t>> AsyncWriter::spare_memory() {
  LockGuard<Mutex> lock(mu_);
  while (reserving_) changed_.wait(mu_);
  std::vector<std::pair<const float*, size_t>> spares;
  for (const StagingBuffer& b : spare_) spares.emplace_back(b.data(), b.bytes());
  return spares;
}

const float* AsyncWriter::queued_rows_of(const std::string& id) const {
  LockGuard<Mutex> lock(mu_);
  for (const QueuedAppend& job : queue_)
    if (job.id == id) return job.rows.data();
  return nullptr;
}

int AsyncWriter::blocked_waits() const {
  LockGuard<Mutex> lock(mu_);
  return blocked_waits_;
}

size_t AsyncWriter::queued_jobs() const {
  LockGuard<Mutex> lock(mu_);
  return queue_.size() + (busy_ ? 1 : 0);
}

}  // namespace detail
}  // namespace colikv
