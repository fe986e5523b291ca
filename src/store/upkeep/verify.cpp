// Store::verify: the Verifier checks the file, every conversation's chunk
// list and chunks, the shares never compared by content, and chunks no
// conversation uses.
#include "store/store_impl.h"

#include <algorithm>
#include <map>
#include <set>

#include "catalog/backend_error.h"
#include "core/chunk_layout.h"
#include "core/chunk_codec.h"
#include "core/store_limits.h"
#include "store/kv_planes.h"
#include "store/store_call.h"

namespace colikv {

using detail::ChunkHash;
using detail::ConversationRow;
using detail::ModelRow;
using detail::range_text;
using detail::key_matches;

namespace {

// Which conversation wrote the values a conversation holds at `first_pos`:
// follow its fork parents while the position lies below the fork point.
// A fork of a deleted conversation (parent_id NULL, forked_at > 0) has lost
// its lineage: its inherited chunks are given an origin of their own.
struct Lineage {
  int64_t parent = 0;  // 0: none or deleted
  int64_t forked_at = 0;
};

int64_t origin_of(const std::map<int64_t, Lineage>& lineage, int64_t conv, int64_t first_pos) {
  for (size_t hops = 0; hops <= lineage.size(); ++hops) {  // bounded: parent_id may be corrupt
    auto it = lineage.find(conv);
    if (it == lineage.end() || first_pos >= it->second.forked_at) return conv;
    if (it->second.parent == 0) return -conv;
    conv = it->second.parent;
  }
  return conv;
}

// Chunks written before schema 5 (no content digest) that still hold values
// and are used by conversations whose values come from different origins:
// schema 4 shared them by token ids alone.
std::vector<UncomparedShare> find_uncompared_shares(detail::Catalog& catalog, const std::string& only) {
  std::map<int64_t, Lineage> lineage;
  std::map<int64_t, std::string> names;
  for (detail::LineageRow& r : catalog.lineage()) {
    names[r.id] = std::move(r.name);
    lineage[r.id] = {r.parent_id, r.forked_at};
  }
  std::vector<UncomparedShare> out;
  UncomparedShare cur;
  std::set<int64_t> origins;
  auto flush = [&] {
    const bool wanted = only.empty() || std::find(cur.conversations.begin(), cur.conversations.end(), only) !=
                                            cur.conversations.end();
    if (origins.size() > 1 && wanted) {
      std::sort(cur.conversations.begin(), cur.conversations.end());
      out.push_back(cur);
    }
    cur = UncomparedShare();
    origins.clear();
  };
  catalog.for_each_undigested_share([&](const detail::ChunkUse& use) {
    if (use.chunk.chunk_id != cur.chunk_id) {
      if (cur.chunk_id >= 0) flush();
      cur.chunk_id = use.chunk.chunk_id;
      cur.first_pos = use.chunk.first_pos;
      cur.end_pos = cur.first_pos + use.chunk.n_tokens;
    }
    const int64_t conv = use.conversation_id;
    cur.conversations.push_back(names.count(conv) ? names[conv] : "#" + std::to_string(conv));
    origins.insert(origin_of(lineage, conv, cur.first_pos));
  });
  if (cur.chunk_id >= 0) flush();
  return out;
}

// A verify, as steps: the file's integrity check, each conversation's chunk
// list (place, tokens, chain hash, then each distinct chunk decoded once),
// the shares never compared by content, chunks no conversation uses, and
// conversations of no tenant.
class Verifier {
 public:
  Verifier(Store::Impl& s, const std::string& only, const ProgressFn& progress)
      : s_(s), only_(only), progress_(progress) {}

  VerifyReport run() {
    s_.assert_in_call();  // Store::verify's: the analysis cannot name s_ there
    check_integrity();
    list_conversations();
    int64_t total_tokens = 0, done_tokens = 0;
    for (auto& c : convs_) total_tokens = detail::saturating_add(total_tokens, c.count);
    for (auto& c : convs_) {
      ++report_.conversations;
      verify_conversation(c);
      done_tokens = detail::saturating_add(done_tokens, c.count);
      if (progress_) progress_(done_tokens, total_tokens);
    }
    report_.uncompared_shares = find_uncompared_shares(s_.catalog(), only_);
    if (only_.empty()) find_strays();
    return std::move(report_);
  }

 private:
  using Conv = ConversationRow;

  // Where one conversation's walk along its chunk list is.
  struct Walk {
    const Conv& conv;
    ModelRow model;
    ChunkHash chain;
    detail::ChunkListWalk layout;
    bool chain_ok = true;
    // The region the chunk is indexed by (docs/format.md, "chunk_meta").
    ChunkHash anchor{};           // the chain hash where it starts
    std::vector<int32_t> region{};  // its tokens so far: at most C
  };

  void problem(const Conv& c, int64_t seq, int64_t chunk_id, int64_t a, int64_t b, const std::string& what) {
    report_.problems.push_back({c.name, seq, chunk_id, a, b, what});
  }

  void check_integrity() REQUIRES(s_.mu) {
    const detail::IntegrityReport integrity = s_.catalog().check_integrity();
    report_.integrity = integrity.text;
    if (integrity.text != "ok")
      report_.problems.push_back({"", -1, -1, -1, -1, integrity.check + ": " + integrity.text});
  }

  void list_conversations() REQUIRES(s_.mu) {
    convs_ = s_.catalog().conversations_to_verify(only_);
  }

  void verify_conversation(const Conv& c) REQUIRES(s_.mu) {
    if (!c.malformed.empty()) {
      problem(c, -1, -1, -1, -1, c.malformed);
      return;
    }
    ModelRow m;
    try {
      m = s_.model_by_id(c.model_id);
    } catch (const Error& e) {
      problem(c, -1, -1, 0, c.count, e.what());
      return;
    }
    Walk walk{c, m, s_.chain_seed(m.text, c.precision), detail::ChunkListWalk(m.chunk_tokens, c.count)};
    try {
      s_.catalog().for_each_verify_row(c.id, [&](const detail::VerifyChunkRow& row) { verify_chunk_row(walk, row); });
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kCorrupt) throw;
      problem(c, -1, -1, -1, -1, e.what());  // a row it cannot read: the rest of its list is not checked
      return;
    }
    const int64_t covered = walk.layout.covered();
    if (covered != c.count)
      problem(c, -1, -1, std::min(covered, c.count), std::max(covered, c.count),
              "chunks cover " + std::to_string(covered) + " positions but the count is " + std::to_string(c.count));
  }

  void verify_chunk_row(Walk& walk, const detail::VerifyChunkRow& row) {
    const Conv& c = walk.conv;
    const int64_t seq = row.seq;
    const int64_t first = row.first_pos;
    const int64_t n = row.n_tokens;
    if (!row.chunk_id) {
      problem(c, seq, -1, walk.layout.covered(), walk.layout.covered(), "the chunk list names a chunk that does not exist");
      walk.chain_ok = false;
      return;
    }
    const int64_t chunk_id = *row.chunk_id;
    const std::string misplaced = walk.layout.next(seq, first, n);
    if (!misplaced.empty() || row.model_id != c.model_id) {
      problem(c, seq, chunk_id, first, detail::saturating_add(first, std::max<int64_t>(n, 0)),
              misplaced.empty() ? "the chunk belongs to another model" : "the chunk " + misplaced);
      walk.layout.skip(seq, first, n);
      walk.chain_ok = false;
      return;
    }
    std::vector<int32_t> toks;
    const std::string_view tokens_json = row.tokens_json;
    const char* text = static_cast<int64_t>(tokens_json.size()) <= detail::max_tokens_json_bytes(n) ? tokens_json.data() : nullptr;
    if (!text || !detail::parse_tokens_json(text, tokens_json.size(), toks) ||
        static_cast<int64_t>(toks.size()) != n) {
      problem(c, seq, chunk_id, first, first + n, "token list is not a JSON array of " + std::to_string(n) + " ids");
      walk.chain_ok = false;
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      if (toks[i] < 0 || toks[i] >= walk.model.sig.vocab) {
        problem(c, seq, chunk_id, first + i, first + i + 1, "token id " + std::to_string(toks[i]) + " is outside the vocabulary");
        break;
      }
    const std::optional<ChunkHash>& digest = row.digest;
    const ChunkHash before = walk.chain;
    if (walk.chain_ok) {
      ChunkHash h = detail::chain_next(walk.chain, toks.data(), n);
      if (!key_matches(row.key, digest, h)) {
        problem(c, seq, chunk_id, first, first + n, "chunk hash does not match the token ids before and in it");
        walk.chain_ok = false;
      }
      walk.chain = h;
    }
    check_index(walk, row, before, toks);
    auto seen = chunk_result_.find(chunk_id);
    if (seen == chunk_result_.end()) seen = chunk_result_.emplace(chunk_id, check_payload(walk, row, toks)).first;
    if (!seen->second.empty()) problem(c, seq, chunk_id, first, first + n, seen->second);
  }

  // chunk_meta indexes a chunk by its region: the chain hash at the chunk
  // boundary at or before it (a tail piece: the anchor), and the token ids
  // from there to its end. Checked while the chain is known.
  void check_index(Walk& walk, const detail::VerifyChunkRow& row, const ChunkHash& before,
                   const std::vector<int32_t>& toks) {
    const int64_t C = walk.model.chunk_tokens;
    const int64_t region_first = row.first_pos / C * C;
    if (row.first_pos == region_first) {
      walk.anchor = before;
      walk.region.clear();
    }
    walk.region.insert(walk.region.end(), toks.begin(), toks.end());
    if (!walk.chain_ok || !row.has_index) return;
    const std::string anchor = region_first == 0 ? detail::tenant_anchor(s_.options().tenant)
                                                 : std::string(reinterpret_cast<const char*>(walk.anchor.data()),
                                                               walk.anchor.size());
    const int64_t end = row.first_pos + row.n_tokens;
    if (row.index_prev && *row.index_prev != anchor)
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.prev_hash is not the chain hash at position " + std::to_string(region_first) +
                  ", where the chunk's region starts");
    const int64_t region_n = static_cast<int64_t>(walk.region.size());
    if (row.index_tokens_json != detail::tokens_to_json(walk.region.data(), region_n))
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.tokens is not the token ids of " + range_text(region_first, end) + ", the chunk's region");
    // match finds conversations by it (and checks it against the chunk's key).
    if (row.index_chain != walk.chain)
      problem(walk.conv, row.seq, *row.chunk_id, row.first_pos, end,
              "chunk_meta.chain_hash is not the chain hash of " + range_text(0, end) + ", the chunk's end");
  }

  // A chunk's payload decoded and checked: "" when sound (or evicted: only
  // its token ids are kept, by design), else what is wrong.
  std::string check_payload(const Walk& walk, const detail::VerifyChunkRow& row, const std::vector<int32_t>& toks) {
    if (!row.has_payload) return "";
    const int64_t n = static_cast<int64_t>(toks.size());
    const std::string& comp = row.compression;
    try {
      bool compressed = false;
      if (!detail::parse_compression(comp, compressed))
        throw Error(ErrorCode::kCorrupt, "unknown compression '" + comp + "'");
      detail::ChunkPrecision precision;
      if (!detail::parse_precision(row.precision, precision))
        throw Error(ErrorCode::kCorrupt, "unknown precision '" + row.precision + "'");
      std::vector<float> buf(static_cast<size_t>(n * walk.model.sig.floats_per_token()));
      ChunkHash decoded_digest;
      detail::decode_chunk(row.payload, row.payload_bytes, compressed, row.raw_size, static_cast<uint32_t>(row.checksum),
                           n, toks.data(), detail::packed_planes(walk.model.sig, buf.data(), n), precision,
                           &decoded_digest);
      if (row.digest && decoded_digest != *row.digest)
        throw Error(ErrorCode::kCorrupt, "content digest does not match its decoded values");
      ++report_.chunks;
      report_.bytes += static_cast<int64_t>(buf.size()) * 4;
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  // Chunks no conversation uses, and conversations of no tenant: those
  // named by number, not name, since their names belong to no tenant asking.
  void find_strays() REQUIRES(s_.mu) {
    const detail::Strays strays = s_.catalog().strays();
    for (const detail::ChunkPlace& c : strays.unused_chunks)
      report_.problems.push_back({"", -1, c.chunk_id, c.first_pos, detail::saturating_add(c.first_pos, c.n_tokens),
                                  "chunk is not used by any conversation"});
    for (const detail::StrandedConversation& c : strays.conversations_of_no_tenant)
      report_.problems.push_back({"", -1, -1, -1, -1,
                                  "conversation row " + std::to_string(c.conversation_id) + " belongs to tenant_id " +
                                      std::to_string(c.tenant_id) +
                                      ", which no tenants row holds: no tenant can read or delete it"});
  }

  Store::Impl& s_;
  const std::string& only_;
  const ProgressFn& progress_;
  VerifyReport report_;
  std::vector<Conv> convs_;
  std::map<int64_t, std::string> chunk_result_;  // chunk_id -> "" or its problem
};

// kNotFound for a missing id; a row that exists but cannot be read is the
// Verifier's to report, not an error.
void require_exists_for_verify(Store::Impl& s, const std::string& id) REQUIRES(s.mu) {
  try {
    s.get_conversation(id);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCorrupt) throw;
  }
}

}  // namespace

VerifyReport Store::verify(const std::string& id, const ProgressFn& progress) {
  return detail::StoreCall::run(*impl_, id.empty() ? nullptr : &id, [&](Store::Impl& s) REQUIRES(s.mu) {
    const auto snapshot = s.catalog().begin(detail::Catalog::Access::kRead, s.where(id));
    if (!id.empty()) require_exists_for_verify(s, id);
    return Verifier(s, id, progress).run();
  });
}

}  // namespace colikv
