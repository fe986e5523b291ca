// The C API: a thin shell over colikv::Store that never lets an exception
// escape and keeps the last error message per handle and thread.
#include "colikv/colikv.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "store/call_gate.h"
#include "colikv/metrics.h"
#include "colikv/store.h"

struct colikv_store {
  colikv_store();
  ~colikv_store();
  const uint64_t serial;          // names this handle in each thread's error state
  colikv::detail::CallGate gate;  // the C calls in flight, which colikv_close waits for
  std::unique_ptr<colikv::Store> store;  // null when the open failed
};

namespace {

// What a thread's last call on one handle left: per thread, so that threads
// sharing a handle neither race on it nor read each other's messages.
struct ThreadState {
  std::string errmsg;
  int64_t diverged_at = -1;     // of the last call's kDiverged
  std::string info_weights_id;  // what colikv_conversation_info's model.weights_id points to
};
using StateMap = std::unordered_map<uint64_t, ThreadState>;  // by handle serial

// A thread's states. Not a thread_local map: at exit the main thread's
// thread_local objects are destroyed before atexit handlers run, and an
// engine closes its store in one (the adapter does). The owner frees the map
// when the thread ends; a call made after that (from a later atexit handler
// or thread-exit destructor) gets a new map, which is left to the exit.
thread_local StateMap* t_states = nullptr;
thread_local bool t_states_freed = false;
struct StatesOwner {
  ~StatesOwner() {
    delete t_states;
    t_states = nullptr;
    t_states_freed = true;
  }
};
thread_local StatesOwner t_states_owner;

StateMap& thread_states() {
  if (!t_states) {
    t_states = new StateMap();
    if (!t_states_freed) (void)&t_states_owner;  // constructs it: its destructor runs at thread exit
  }
  return *t_states;
}

// The serials of the open handles: a thread's states of closed handles are
// dropped when it holds more than a few (its memory follows the open handles).
// Never destroyed: a handle may be closed from an atexit handler or a static's destructor.
std::atomic<uint64_t> g_next_serial{1};
std::mutex& g_open_mu = *new std::mutex();
std::unordered_set<uint64_t>& g_open = *new std::unordered_set<uint64_t>();
constexpr size_t kStatesBeforePrune = 16;

ThreadState& state_of(const colikv_store* s) {
  StateMap& states = thread_states();
  auto it = states.find(s->serial);
  if (it != states.end()) return it->second;
  // try_lock: in a forked child a parent's thread may have held it at the fork.
  if (states.size() >= kStatesBeforePrune && g_open_mu.try_lock()) {
    for (auto e = states.begin(); e != states.end();) e = g_open.count(e->first) ? std::next(e) : states.erase(e);
    g_open_mu.unlock();
  }
  return states[s->serial];
}

const ThreadState* find_state(const colikv_store* s) {
  if (!t_states) return nullptr;
  auto it = t_states->find(s->serial);
  return it == t_states->end() ? nullptr : &it->second;
}

}  // namespace

colikv_store::colikv_store() : serial(g_next_serial++) {
  std::lock_guard<std::mutex> lock(g_open_mu);
  g_open.insert(serial);
}

colikv_store::~colikv_store() {
  if (!gate.forked()) {
    std::lock_guard<std::mutex> lock(g_open_mu);
    g_open.erase(serial);
  } else if (g_open_mu.try_lock()) {
    g_open.erase(serial);
    g_open_mu.unlock();
  }
}

namespace {

colikv::ModelSignature to_signature(const colikv_model* m) {
  colikv::ModelSignature s;
  s.n_layers = m->n_layers;
  s.kv_lora = m->kv_lora;
  s.qk_rope = m->qk_rope;
  s.index_hd = m->index_hd;
  s.n_indexed = m->n_indexed;
  s.vocab = m->vocab;
  s.weights_id = m->weights_id ? m->weights_id : "";
  return s;
}

// Runs f, returning its result, or the error's negative code with the message
// kept in the calling thread's state of s. Counted in s's gate: colikv_close
// waits for it, and it fails at once in a forked child.
template <class R, class F>
R guarded(colikv_store* s, F&& f) {
  if (!s) return static_cast<R>(COLIKV_ERR_INVALID);
  ThreadState& st = state_of(s);
  st.errmsg.clear();
  st.diverged_at = -1;
  try {
    s->gate.enter([&] {
      return s->store ? "store " + colikv::shown_store_location(s->store->path()) : std::string("colikv");
    });
  } catch (const colikv::Error& e) {
    st.errmsg = e.what();
    return static_cast<R>(e.code());
  }
  struct Leave {
    colikv::detail::CallGate& gate;
    ~Leave() { gate.leave(); }
  } leave{s->gate};
  try {
    if (!s->store) throw colikv::Error(colikv::ErrorCode::kInvalidArgument, "the store handle failed to open");
    return f(*s->store);
  } catch (const colikv::Error& e) {
    st.errmsg = e.what();
    if (e.code() == colikv::ErrorCode::kDiverged) st.diverged_at = e.position();
    return static_cast<R>(e.code());
  } catch (const std::bad_alloc&) {
    st.errmsg = "out of memory";
    return static_cast<R>(COLIKV_ERR_INTERNAL);
  } catch (const std::exception& e) {
    st.errmsg = std::string("internal error: ") + e.what();
    return static_cast<R>(COLIKV_ERR_INTERNAL);
  } catch (...) {
    st.errmsg = "internal error: unknown exception";
    return static_cast<R>(COLIKV_ERR_INTERNAL);
  }
}

void require(bool ok, const char* what) {
  if (!ok) throw colikv::Error(colikv::ErrorCode::kInvalidArgument, what);
}

}  // namespace

extern "C" {

int colikv_open(const char* path, int flags, colikv_store** out) {
  colikv_options o = {flags & ~(COLIKV_FILE_MODE | COLIKV_TENANT), 0, 0, 0, nullptr};
  return colikv_open_ex(path, &o, out);
}

int colikv_open_ex(const char* path, const colikv_options* opts, colikv_store** out) {
  if (!out) return COLIKV_ERR_INVALID;
  *out = nullptr;
  colikv_store* s = new (std::nothrow) colikv_store();
  if (!s) return COLIKV_ERR_INTERNAL;
  *out = s;
  ThreadState& ts = state_of(s);
  try {
    require(path != nullptr, "colikv_open: path is NULL");
    const colikv_options defaults = {COLIKV_CREATE, 0, 0, 0, nullptr};
    const colikv_options& c = opts ? *opts : defaults;
    require(c.busy_timeout_ms >= 0, "colikv_open_ex: busy_timeout_ms is negative");
    require(c.max_store_bytes >= 0, "colikv_open_ex: max_store_bytes is negative");
    colikv::Options o;
    o.create_if_missing = (c.flags & COLIKV_CREATE) != 0;
    o.read_only = (c.flags & COLIKV_READONLY) != 0;
    o.synchronous = (c.flags & COLIKV_SYNC_NORMAL) ? colikv::Synchronous::kNormal : colikv::Synchronous::kFull;
    if (c.flags & COLIKV_PRECISION_BF16) o.new_conversation_precision = colikv::Precision::kBf16;
    if (c.busy_timeout_ms > 0) o.busy_timeout_ms = c.busy_timeout_ms;
    o.max_store_bytes = c.max_store_bytes;
    o.create_staged = (c.flags & COLIKV_CREATE_STAGED) != 0;
    o.prefault_async_staging = (c.flags & COLIKV_PREFAULT_STAGING) != 0;
    // Only with the flag: an older caller's struct ends before file_mode.
    if (c.flags & COLIKV_FILE_MODE) {
      require(c.file_mode >= 0 && c.file_mode <= 0777, "colikv_open_ex: file_mode has bits outside 0777");
      o.file_mode = c.file_mode;
    }
    // Likewise tenant, after file_mode.
    if ((c.flags & COLIKV_TENANT) && c.tenant) o.tenant = c.tenant;
    s->store.reset(new colikv::Store(path, o));
    return COLIKV_OK;
  } catch (const colikv::Error& e) {
    ts.errmsg = e.what();
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    ts.errmsg = std::string("internal error: ") + e.what();
    return COLIKV_ERR_INTERNAL;
  } catch (...) {
    ts.errmsg = "internal error: unknown exception";
    return COLIKV_ERR_INTERNAL;
  }
}

void colikv_close(colikv_store* s) {
  if (!s) return;
  // Waits for the calls other threads have in flight on s (new ones are
  // refused); in a forked child frees s without joining (~Store leaks the
  // parent's store).
  s->gate.close();
  try {
    delete s;
  } catch (...) {
  }
}

int colikv_publish(colikv_store* s) {
  return guarded<int>(s, [&](colikv::Store& st) {
    st.publish();
    return COLIKV_OK;
  });
}

const char* colikv_errmsg(const colikv_store* s) {
  if (!s) return "no store handle (NULL)";
  const ThreadState* st = find_state(s);
  return st ? st->errmsg.c_str() : "";
}

int64_t colikv_count(colikv_store* s, const char* conv) {
  return guarded<int64_t>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_count: conv is NULL");
    return st.count(conv);
  });
}

int colikv_append(colikv_store* s, const char* conv, const colikv_model* m, const int32_t* tokens, int64_t len,
                  const float* const* Lc, const float* const* Rc, const float* const* Ic) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_append: conv is NULL");
    require(m != nullptr, "colikv_append: model is NULL");
    const colikv::KvSource kv{Lc, Rc, Ic};
    st.append(conv, to_signature(m), tokens, len, kv);
    return COLIKV_OK;
  });
}

int colikv_append_async(colikv_store* s, const char* conv, const colikv_model* m, const int32_t* tokens, int64_t len,
                        const float* const* Lc, const float* const* Rc, const float* const* Ic) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_append_async: conv is NULL");
    require(m != nullptr, "colikv_append_async: model is NULL");
    st.append_async(conv, to_signature(m), tokens, len, colikv::KvSource{Lc, Rc, Ic});
    return COLIKV_OK;
  });
}

int colikv_wait(colikv_store* s, const char* conv) {
  return guarded<int>(s, [&](colikv::Store& st) {
    if (conv) st.wait(conv);
    else st.wait();
    return COLIKV_OK;
  });
}

int colikv_write(colikv_store* s, const char* conv, const colikv_model* m, const int32_t* tokens, int64_t from,
                 int64_t len, const float* const* Lc, const float* const* Rc, const float* const* Ic) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_write: conv is NULL");
    require(m != nullptr, "colikv_write: model is NULL");
    const colikv::KvSource kv{Lc, Rc, Ic};
    st.write(conv, to_signature(m), tokens, from, len, kv);
    return COLIKV_OK;
  });
}

int64_t colikv_diverged_at(const colikv_store* s) {
  const ThreadState* st = s ? find_state(s) : nullptr;
  return st ? st->diverged_at : -1;
}

int colikv_conversation_info(colikv_store* s, const char* conv, colikv_info* out) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr && out != nullptr, "colikv_conversation_info: conv or out is NULL");
    const colikv::ConversationInfo i = st.info(conv);
    std::string& weights_id = state_of(s).info_weights_id;
    weights_id = i.model.weights_id;
    out->tokens = i.tokens;
    out->model.n_layers = i.model.n_layers;
    out->model.kv_lora = i.model.kv_lora;
    out->model.qk_rope = i.model.qk_rope;
    out->model.index_hd = i.model.index_hd;
    out->model.n_indexed = i.model.n_indexed;
    out->model.vocab = i.model.vocab;
    out->model.weights_id = weights_id.c_str();
    out->raw_bytes = i.raw_bytes;
    out->stored_bytes = i.stored_bytes;
    out->last_used_ms = i.last_used_ms;
    out->evicted = i.evicted ? 1 : 0;
    return COLIKV_OK;
  });
}

int64_t colikv_load_range(colikv_store* s, const char* conv, const colikv_model* m, int64_t from, int64_t to,
                          int32_t* tokens, float* const* Lc, float* const* Rc, float* const* Ic) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t {
    require(conv != nullptr, "colikv_load_range: conv is NULL");
    require(m != nullptr, "colikv_load_range: model is NULL");
    const colikv::KvTarget kv{Lc, Rc, Ic};
    return st.load_range(conv, to_signature(m), from, to, tokens, kv);
  });
}

int colikv_weights_id_from_dir(const char* model_dir, char* out, size_t out_size) {
  std::string text;
  int rc = COLIKV_OK;
  try {
    if (!model_dir) throw colikv::Error(colikv::ErrorCode::kInvalidArgument, "colikv_weights_id_from_dir: model_dir is NULL");
    text = colikv::weights_id_from_dir(model_dir);
    if (text.size() + 1 > out_size) {
      rc = COLIKV_ERR_TOO_LARGE;
      text = "colikv_weights_id_from_dir: the identity needs " + std::to_string(text.size() + 1) + " bytes";
    }
  } catch (const colikv::Error& e) {
    rc = static_cast<int>(e.code());
    text = e.what();
  } catch (const std::exception& e) {
    rc = COLIKV_ERR_INTERNAL;
    text = std::string("internal error: ") + e.what();
  }
  if (out && out_size > 0) {
    const size_t n = std::min(text.size(), out_size - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return rc;
}

static int64_t load_impl(colikv_store* s, const char* conv, const colikv_model* m, int32_t* tokens, int64_t max_tokens,
                         int64_t limit, float* const* Lc, float* const* Rc, float* const* Ic) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t {
    require(conv != nullptr, "colikv_load: conv is NULL");
    require(m != nullptr, "colikv_load: model is NULL");
    if (!st.exists(conv)) return 0;
    const colikv::KvTarget kv{Lc, Rc, Ic};
    return st.load(conv, to_signature(m), tokens, max_tokens, kv, limit);
  });
}

int64_t colikv_load(colikv_store* s, const char* conv, const colikv_model* m, int32_t* tokens, int64_t max_tokens,
                    float* const* Lc, float* const* Rc, float* const* Ic) {
  return load_impl(s, conv, m, tokens, max_tokens, -1, Lc, Rc, Ic);
}

int64_t colikv_load_prefix(colikv_store* s, const char* conv, const colikv_model* m, int64_t k, int32_t* tokens,
                           float* const* Lc, float* const* Rc, float* const* Ic) {
  if (k < 0) return guarded<int64_t>(s, [](colikv::Store&) -> int64_t { require(false, "colikv_load_prefix: k is negative"); return 0; });
  return load_impl(s, conv, m, tokens, k, k, Lc, Rc, Ic);
}

int colikv_truncate(colikv_store* s, const char* conv, int64_t len) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_truncate: conv is NULL");
    st.truncate(conv, len);
    return COLIKV_OK;
  });
}

int colikv_delete(colikv_store* s, const char* conv) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(conv != nullptr, "colikv_delete: conv is NULL");
    st.remove(conv);
    return COLIKV_OK;
  });
}

int colikv_fork(colikv_store* s, const char* src, const char* dst, int64_t len) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(src != nullptr && dst != nullptr, "colikv_fork: src or dst is NULL");
    st.fork(src, dst, len);
    return COLIKV_OK;
  });
}

}  // extern "C"

namespace {

// Writes a matched conversation's id and its NUL to conv_out, or throws kTooLarge.
void copy_id(const std::string& id, const char* fn, char* conv_out, size_t conv_cap) {
  if (id.size() + 1 > conv_cap)
    throw colikv::Error(colikv::ErrorCode::kTooLarge, std::string(fn) + ": the matching conversation's id '" + id +
                                                          "' needs " + std::to_string(id.size() + 1) +
                                                          " bytes but conv_cap is " + std::to_string(conv_cap));
  std::memcpy(conv_out, id.c_str(), id.size() + 1);
}

// colikv_match and colikv_match_loadable: `find` is the Store method.
int64_t match_into(colikv_store* s, const char* fn, const colikv_model* m, const int32_t* tokens, int64_t len,
                   char* conv_out, size_t conv_cap,
                   colikv::PrefixMatch (colikv::Store::*find)(const colikv::ModelSignature&, const int32_t*, int64_t)) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t {
    const std::string name(fn);
    require(m != nullptr, (name + ": model is NULL").c_str());
    require(conv_out != nullptr && conv_cap > 0, (name + ": conv_out is NULL or conv_cap is 0").c_str());
    conv_out[0] = '\0';
    colikv::PrefixMatch r = (st.*find)(to_signature(m), tokens, len);
    copy_id(r.id, fn, conv_out, conv_cap);
    return r.tokens;
  });
}

}  // namespace

extern "C" {

int64_t colikv_match(colikv_store* s, const colikv_model* m, const int32_t* tokens, int64_t len, char* conv_out,
                     size_t conv_cap) {
  return match_into(s, "colikv_match", m, tokens, len, conv_out, conv_cap, &colikv::Store::match);
}

int64_t colikv_match_loadable(colikv_store* s, const colikv_model* m, const int32_t* tokens, int64_t len,
                              char* conv_out, size_t conv_cap) {
  return match_into(s, "colikv_match_loadable", m, tokens, len, conv_out, conv_cap, &colikv::Store::match_loadable);
}

int64_t colikv_adopt(colikv_store* s, const colikv_model* m, const int32_t* prompt, int64_t len, int64_t from,
                     char* conv_out, size_t conv_cap, int32_t* tokens, float* const* Lc, float* const* Rc,
                     float* const* Ic) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t {
    require(m != nullptr, "colikv_adopt: model is NULL");
    require(conv_out != nullptr && conv_cap > 0, "colikv_adopt: conv_out is NULL or conv_cap is 0");
    conv_out[0] = '\0';
    const colikv::PrefixMatch r = st.adopt(to_signature(m), prompt, len, from, tokens, colikv::KvTarget{Lc, Rc, Ic});
    copy_id(r.id, "colikv_adopt", conv_out, conv_cap);
    return r.tokens;
  });
}

int64_t colikv_gc(colikv_store* s, int64_t max_bytes) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t { return st.gc(max_bytes).freed_bytes; });
}

int colikv_tenant_limits(colikv_store* s, int64_t* max_bytes, int64_t* max_idle_ms) {
  return guarded<int>(s, [&](colikv::Store& st) {
    const colikv::TenantLimits l = st.tenant_limits();
    if (max_bytes) *max_bytes = l.max_bytes.value_or(COLIKV_NO_LIMIT);
    if (max_idle_ms) *max_idle_ms = l.max_idle_ms.value_or(COLIKV_NO_LIMIT);
    return COLIKV_OK;
  });
}

int colikv_set_tenant_limits(colikv_store* s, int64_t max_bytes, int64_t max_idle_ms) {
  return guarded<int>(s, [&](colikv::Store& st) {
    require(max_bytes >= COLIKV_NO_LIMIT, "colikv_set_tenant_limits: max_bytes is negative (COLIKV_NO_LIMIT for none)");
    require(max_idle_ms >= COLIKV_NO_LIMIT,
            "colikv_set_tenant_limits: max_idle_ms is negative (COLIKV_NO_LIMIT for none)");
    colikv::TenantLimits l;
    if (max_bytes != COLIKV_NO_LIMIT) l.max_bytes = max_bytes;
    if (max_idle_ms != COLIKV_NO_LIMIT) l.max_idle_ms = max_idle_ms;
    st.set_tenant_limits(l);
    return COLIKV_OK;
  });
}

int64_t colikv_expire(colikv_store* s, int64_t max_idle_ms) {
  return guarded<int64_t>(s, [&](colikv::Store& st) -> int64_t {
    return static_cast<int64_t>(st.expire(max_idle_ms).conversations.size());
  });
}

int64_t colikv_metrics_text(colikv_store* s, char* buf, size_t len) {
  auto copy_out = [&](const std::string& text) -> int64_t {
    const size_t need = text.size() + 1;
    if (buf && len >= need) std::memcpy(buf, text.c_str(), need);
    return static_cast<int64_t>(need);
  };
  if (!s) {  // the process's totals: no handle, no gate
    try {
      return copy_out(colikv::metrics_text(colikv::process_metrics()));
    } catch (...) {
      return COLIKV_ERR_INTERNAL;
    }
  }
  return guarded<int64_t>(s, [&](colikv::Store& st) { return copy_out(colikv::metrics_text({st.metrics()})); });
}

const char* colikv_strerror(int code) {
  if (code > 0) return "not an error code";
  return colikv::error_code_name(static_cast<colikv::ErrorCode>(code));
}

}  // extern "C"
