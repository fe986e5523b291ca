// chat_service: a chat service with 4 engine slots serving a few hundred
// conversations through colikv.
//
//   chat_service [STORE] [--conversations N] [--seed S] [--budget-percent P]
//
// The "engine" is a deterministic fake: the vectors of position p are derived
// from the token ids [0, p], as a real model's attention state is. Each slot
// holds engine-shaped buffers (Lc[layer] + pos*kv_lora, Rc[layer] + pos*qk_rope).
// Clients resend whole transcripts; conversations share three system prompts,
// and some requests regenerate an answer (the transcript diverges mid-way).
//
// For each request the service
//   1. finds the conversation: in a slot, else by its id in the store, else (a
//      new chat) the stored conversation holding the longest prefix of the prompt;
//   2. takes its slot, a free slot, or the least recently used slot;
//   3. loads what the store holds of the common prefix (an evicted conversation
//      returns its token ids only: what is missing is recomputed);
//   4. truncates the stored conversation where the prompt diverges from it;
//   5. computes the positions no one had, generates a reply, and appends;
// and checks after every request that the slot's buffers equal a fresh
// computation of its tokens, bit for bit. The store has a byte budget, so the
// least recently used conversations get evicted and re-saved along the way.
// Exit status 0 when every check passed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "colikv/store.h"

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Rng {
  uint64_t s;
  uint64_t next() { return s = mix(s); }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

const int kSlots = 4;
const int64_t kCapacity = 1024;  // positions a slot holds

colikv::ModelSignature fake_model() {
  colikv::ModelSignature m;
  m.n_layers = 3;
  m.kv_lora = 8;
  m.qk_rope = 4;
  m.vocab = 32000;
  m.weights_id = "fake-model-v1";
  return m;
}

// One engine slot: the KV buffers and the tokens they hold.
struct Slot {
  std::string conv;           // "" when free
  std::vector<int32_t> tokens;  // positions whose KV is in the buffers
  uint64_t last_used = 0;
  std::vector<std::vector<float>> lc, rc;
  std::vector<float*> lw, rw;
  std::vector<const float*> lr, rr;

  explicit Slot(const colikv::ModelSignature& m) {
    for (int l = 0; l < m.n_layers; ++l) {
      lc.emplace_back(static_cast<size_t>(kCapacity * m.kv_lora));
      rc.emplace_back(static_cast<size_t>(kCapacity * m.qk_rope));
    }
    for (int l = 0; l < m.n_layers; ++l) {
      lw.push_back(lc[l].data());
      rw.push_back(rc[l].data());
      lr.push_back(lc[l].data());
      rr.push_back(rc[l].data());
    }
  }
  colikv::KvTarget target() { return {lw.data(), rw.data(), nullptr}; }
  colikv::KvSource source() const { return {lr.data(), rr.data(), nullptr}; }
};

// The fake model: position p's vectors from a hash of tokens [0, p].
struct FakeModel {
  colikv::ModelSignature m;
  // state[p]: the running hash after token p.
  std::vector<uint64_t> states(const std::vector<int32_t>& t, int64_t upto) const {
    std::vector<uint64_t> h(static_cast<size_t>(upto));
    uint64_t s = 0x1234;
    for (int64_t p = 0; p < upto; ++p) h[p] = s = mix(s ^ static_cast<uint64_t>(t[p]) * 0x100000001b3ULL);
    return h;
  }
  float value(uint64_t state, int layer, int which, int j) const {
    uint64_t v = mix(state ^ (static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(which) << 32) ^ static_cast<uint64_t>(j));
    return static_cast<float>(static_cast<int64_t>(v % 2000001) - 1000000) / 1000000.0f;
  }
  // Prefill: computes positions [from, to) of slot from its tokens.
  void compute(Slot& s, int64_t from, int64_t to) const {
    auto h = states(s.tokens, to);
    for (int64_t p = from; p < to; ++p)
      for (int l = 0; l < m.n_layers; ++l) {
        for (int j = 0; j < m.kv_lora; ++j) s.lc[l][p * m.kv_lora + j] = value(h[p], l, 0, j);
        for (int j = 0; j < m.qk_rope; ++j) s.rc[l][p * m.qk_rope + j] = value(h[p], l, 1, j);
      }
  }
  // A reply: deterministic tokens following the transcript.
  std::vector<int32_t> reply(const std::vector<int32_t>& t, int n) const {
    uint64_t s = t.empty() ? 1 : states(t, static_cast<int64_t>(t.size())).back();
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<int32_t>((s = mix(s)) % static_cast<uint64_t>(m.vocab)));
    return out;
  }
  // Do the slot's buffers hold exactly what a fresh computation gives?
  bool check(const Slot& s) const {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    auto h = states(s.tokens, n);
    for (int64_t p = 0; p < n; ++p)
      for (int l = 0; l < m.n_layers; ++l) {
        for (int j = 0; j < m.kv_lora; ++j)
          if (s.lc[l][p * m.kv_lora + j] != value(h[p], l, 0, j)) return false;
        for (int j = 0; j < m.qk_rope; ++j)
          if (s.rc[l][p * m.qk_rope + j] != value(h[p], l, 1, j)) return false;
      }
    return true;
  }
};

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(a.size()) && n < static_cast<int64_t>(b.size()) && a[n] == b[n]) ++n;
  return n;
}

struct Counters {
  int64_t requests = 0, new_chats = 0, regenerations = 0, prefix_matches = 0, slot_hits = 0, slot_evictions = 0;
  int64_t evicted_loads = 0, truncates = 0;
  int64_t from_slot = 0, from_store = 0, recomputed = 0;
  int64_t failures = 0;
};

class Service {
 public:
  Service(colikv::Store& store, const colikv::ModelSignature& m) : store_(store), model_{m} {
    for (int i = 0; i < kSlots; ++i) slots_.emplace_back(m);
  }

  // Serves one request: the client's whole transcript for conversation id.
  // Returns the transcript with the model's reply appended.
  std::vector<int32_t> serve(const std::string& id, const std::vector<int32_t>& prompt, Counters& c) {
    ++c.requests;
    ++tick_;
    Slot& s = slot_for(id, c);
    const bool in_slot = s.conv == id;
    int64_t have = 0;  // positions of the slot valid for this prompt
    if (in_slot) {
      ++c.slot_hits;
      have = common_prefix(s.tokens, prompt);
      c.from_slot += have;
    } else {
      s.conv = id;
      s.tokens.clear();
      std::string source = id;
      int64_t want = 0;
      if (store_.exists(id)) {
        want = common_prefix(store_.tokens(id), prompt);
      } else {
        ++c.new_chats;
        colikv::PrefixMatch pm = store_.match(model_.m, prompt.data(), static_cast<int64_t>(prompt.size()));
        if (pm.tokens > 0) ++c.prefix_matches;
        source = pm.id;
        want = pm.loadable;
      }
      have = load(s, source, want, c);
      c.from_store += have;
    }
    // The stored conversation keeps only what the prompt agrees with.
    const int64_t committed = store_.count(id);
    if (committed > 0) {
      const int64_t agree = common_prefix(store_.tokens(id), prompt);
      if (agree < committed) {
        store_.truncate(id, agree);
        ++c.truncates;
      }
    }
    // Prefill what no one had, then generate a reply.
    s.tokens = prompt;
    model_.compute(s, have, static_cast<int64_t>(prompt.size()));
    c.recomputed += static_cast<int64_t>(prompt.size()) - have;
    const auto reply = model_.reply(prompt, 5 + static_cast<int>(prompt.size() % 20));
    const int64_t before = static_cast<int64_t>(s.tokens.size());
    s.tokens.insert(s.tokens.end(), reply.begin(), reply.end());
    model_.compute(s, before, static_cast<int64_t>(s.tokens.size()));
    store_.append(id, model_.m, s.tokens.data(), static_cast<int64_t>(s.tokens.size()), s.source());
    s.last_used = tick_;
    if (!model_.check(s)) {
      ++c.failures;
      std::fprintf(stderr, "request %lld: slot of '%s' differs from a fresh computation\n",
                   static_cast<long long>(c.requests), id.c_str());
    }
    return s.tokens;
  }

 private:
  Slot& slot_for(const std::string& id, Counters& c) {
    for (auto& s : slots_)
      if (s.conv == id) return s;
    for (auto& s : slots_)
      if (s.conv.empty()) return s;
    ++c.slot_evictions;  // the slot's conversation is saved already: just reuse it
    return *std::min_element(slots_.begin(), slots_.end(),
                             [](const Slot& a, const Slot& b) { return a.last_used < b.last_used; });
  }

  // Loads up to `want` positions of conversation src into the slot; returns
  // how many were loaded (fewer when its KV data was evicted).
  int64_t load(Slot& s, const std::string& src, int64_t want, Counters& c) {
    if (src.empty() || want == 0) return 0;
    s.tokens.assign(static_cast<size_t>(want), 0);
    try {
      return store_.load(src, model_.m, s.tokens.data(), kCapacity, s.target(), want);
    } catch (const colikv::Error& e) {
      if (e.code() != colikv::ErrorCode::kEvicted) throw;
      ++c.evicted_loads;  // its token ids came back; the KV up to e.position() is still stored
      const int64_t keep = e.position();
      return keep == 0 ? 0 : store_.load(src, model_.m, s.tokens.data(), kCapacity, s.target(), keep);
    }
  }

  colikv::Store& store_;
  FakeModel model_;
  std::vector<Slot> slots_;
  uint64_t tick_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string path = "chat-service.db";
  int conversations = 300;
  uint64_t seed = 1;
  int budget_percent = 25;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--conversations" && i + 1 < argc) conversations = std::atoi(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--budget-percent" && i + 1 < argc) budget_percent = std::atoi(argv[++i]);
    else if (!a.empty() && a[0] != '-') path = a;
    else {
      std::fprintf(stderr, "usage: chat_service [STORE] [--conversations N] [--seed S] [--budget-percent P]\n");
      return 2;
    }
  }
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  const colikv::ModelSignature m = fake_model();
  const int64_t record = 4 * m.floats_per_token();
  colikv::Options o;
  o.chunk_target_bytes = 16 * record;  // 16 tokens a chunk, as a 78-layer model gets
  o.synchronous = colikv::Synchronous::kNormal;
  o.page_size = 4096;
  // The budget: a share of what every conversation would take at its final
  // length (about 3 turns of ~60 tokens after a 40-token system prompt).
  o.max_store_bytes = budget_percent <= 0 ? 0 : int64_t{conversations} * 220 * record * budget_percent / 100;
  auto t0 = std::chrono::steady_clock::now();
  try {
    colikv::Store store(path, o);
    Service service(store, m);
    Rng rng{seed};
    std::vector<std::vector<int32_t>> systems;
    for (int k = 0; k < 3; ++k) {
      std::vector<int32_t> sp;
      for (int i = 0; i < 40; ++i) sp.push_back(static_cast<int32_t>(rng.below(m.vocab)));
      systems.push_back(sp);
    }
    auto user_message = [&] {
      std::vector<int32_t> u;
      const int n = 8 + rng.below(30);
      for (int i = 0; i < n; ++i) u.push_back(static_cast<int32_t>(rng.below(m.vocab)));
      return u;
    };
    // What each client holds: its transcript (empty until its first request).
    std::vector<std::vector<int32_t>> transcript(static_cast<size_t>(conversations));
    std::vector<int> turns(static_cast<size_t>(conversations), 0);
    Counters c;
    const int total_turns = conversations * 3;
    for (int r = 0; r < total_turns; ++r) {
      // Recent conversations are more active: pick among a sliding window.
      const int open = std::min(conversations, 4 + r / 3);
      const int i = open - 1 - std::min(open - 1, rng.below(8) == 0 ? rng.below(open) : rng.below(12));
      auto& t = transcript[static_cast<size_t>(i)];
      std::vector<int32_t> prompt;
      if (t.empty()) {
        prompt = systems[static_cast<size_t>(i % 3)];
      } else if (turns[static_cast<size_t>(i)] > 0 && rng.below(6) == 0 && t.size() > 45) {
        // Regenerate: the client edits an earlier message; the transcript diverges mid-way.
        ++c.regenerations;
        prompt.assign(t.begin(), t.begin() + 40 + rng.below(static_cast<int>(t.size()) - 40));
      } else {
        prompt = t;
      }
      const auto u = user_message();
      prompt.insert(prompt.end(), u.begin(), u.end());
      if (static_cast<int64_t>(prompt.size()) + 40 > kCapacity) prompt.resize(static_cast<size_t>(kCapacity - 40));
      t = service.serve("chat-" + std::to_string(i), prompt, c);
      ++turns[static_cast<size_t>(i)];
    }
    // Every conversation the clients hold is in the store, token for token.
    for (int i = 0; i < conversations; ++i) {
      const auto& t = transcript[static_cast<size_t>(i)];
      if (t.empty()) continue;
      if (store.tokens("chat-" + std::to_string(i)) != t) {
        ++c.failures;
        std::fprintf(stderr, "chat-%d: stored tokens differ from the client's transcript\n", i);
      }
    }
    const colikv::StoreStats st = store.stats();
    const int64_t total = c.from_slot + c.from_store + c.recomputed;
    std::printf("chat_service: %lld requests over %lld conversations (%lld new chats, %lld regenerations), %d slots\n",
                static_cast<long long>(c.requests), static_cast<long long>(store.conversation_count()),
                static_cast<long long>(c.new_chats), static_cast<long long>(c.regenerations), kSlots);
    std::printf("  prompt tokens: %lld reused from a slot, %lld loaded from the store, %lld recomputed (%.1f%% reused)\n",
                static_cast<long long>(c.from_slot), static_cast<long long>(c.from_store),
                static_cast<long long>(c.recomputed), total ? 100.0 * (c.from_slot + c.from_store) / total : 0.0);
    std::printf("  new chats that reused another conversation's prefix: %lld; truncates on divergence: %lld\n",
                static_cast<long long>(c.prefix_matches), static_cast<long long>(c.truncates));
    std::printf("  slot evictions: %lld; loads of evicted conversations (re-prefilled, re-saved): %lld\n",
                static_cast<long long>(c.slot_evictions), static_cast<long long>(c.evicted_loads));
    std::printf("  store: %lld of %lld KV bytes budget used, %lld conversations evicted now, %lld chunks shared or stored\n",
                static_cast<long long>(st.total.stored_bytes), static_cast<long long>(o.max_store_bytes),
                static_cast<long long>(st.evicted_conversations), static_cast<long long>(st.total.chunks));
    std::printf("  every slot matched a fresh computation after every request: %s (%.2f s)\n",
                c.failures == 0 ? "yes" : "NO",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (o.max_store_bytes > 0 && st.total.stored_bytes > o.max_store_bytes) {
      std::fprintf(stderr, "the store exceeds its budget\n");
      return 1;
    }
    if (!store.verify().ok()) {
      std::fprintf(stderr, "verify found problems\n");
      return 1;
    }
    return c.failures == 0 ? 0 : 1;
  } catch (const colikv::Error& e) {
    std::fprintf(stderr, "chat_service: %s\n", e.what());
    return 1;
  }
}
