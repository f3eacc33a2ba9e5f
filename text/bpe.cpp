#include "text/bpe.h"

#include <bit>
#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "text/byte_level.h"

namespace switchyard::text {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError(source + ": model: " + what, kExitBadContent);
}

// The most ids a vocabulary may span (a GGUF's tokenizer.ggml.tokens is held to the same).
constexpr std::int64_t kMaxVocabularyIds = std::int64_t{1} << 24;

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& source) {
  if (!model.is_object()) bad(source, "is not an object");
  const auto type = model.find("type");
  if (type == model.end() || *type != "BPE")
    bad(source, "type " + (type == model.end() ? std::string("(none)") : json_excerpt(*type)) +
                    " is not a model this tokenizer reads (BPE)");
  for (const char* option : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(option);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get_ref<const std::string&>().empty()))
      bad(source, std::string(option) + " " + json_excerpt(*it) + " is not supported");
  }
  const auto flag = [&](const char* name) {
    const auto it = model.find(name);
    if (it == model.end() || it->is_null()) return false;
    if (!it->is_boolean()) bad(source, std::string(name) + " " + json_excerpt(*it) + " is not true or false");
    return it->get<bool>();
  };
  byte_fallback_ = flag("byte_fallback");
  fuse_unk_ = flag("fuse_unk");
  ignore_merges_ = flag("ignore_merges");
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) bad(source, "vocab is not an object of token -> id");
  // Ids need not be dense (GPT-4o's file skips some): the table has a hole, "", for each id unused.
  ids_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= kMaxVocabularyIds)
      bad(source, "vocab entry " + json_excerpt(nlohmann::json(token)) + " has id " + json_excerpt(id) + ", not one of 0 to " +
                      std::to_string(kMaxVocabularyIds - 1));
    const auto index = static_cast<std::size_t>(id.get<std::int64_t>());
    if (tokens_.size() <= index) tokens_.resize(index + 1);
    if (!tokens_[index].empty()) bad(source, "vocab id " + std::to_string(index) + " is given twice");
    tokens_[index] = token;
    ids_.emplace(token, static_cast<std::int32_t>(index));
  }
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) bad(source, "merges is not a list");
  std::size_t slots = 16;
  while (slots < 2 * merges->size()) slots *= 2;
  merge_keys_.assign(slots, kNoKey);
  merge_values_.assign(slots, Merge{});
  merge_shift_ = 64 - std::countr_zero(slots);
  std::int32_t rank = 0;
  for (const auto& entry : *merges) {
    // "a b" (older files) or ["a", "b"].
    std::string a, b;
    if (entry.is_string()) {
      const std::string& text = entry.get_ref<const std::string&>();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos) bad(source, "merge #" + std::to_string(rank) + " " + json_excerpt(entry) + " is not \"A B\"");
      a = text.substr(0, space);
      b = text.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
      a = entry[0].get<std::string>();
      b = entry[1].get<std::string>();
    } else {
      bad(source, "merge #" + std::to_string(rank) + " " + json_excerpt(entry) + " is not \"A B\" or [\"A\", \"B\"]");
    }
    const std::int32_t left = id_of(a), right = id_of(b), result = id_of(a + b);
    if (left < 0 || right < 0 || result < 0)
      bad(source, "merge #" + std::to_string(rank) + " " + json_excerpt(entry) + " names a token the vocabulary lacks");
    add_merge(left, right, Merge{rank, result});  // the first (lowest) rank wins
    ++rank;
  }
  if (const auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    if (!unk->is_string() || (unk_id_ = id_of(unk->get<std::string>())) < 0)
      bad(source, "unk_token " + json_excerpt(*unk) + " is not a token of the vocabulary");
  }
  // Sentencepiece's byte tokens "<0x00>" .. "<0xFF>", for the characters the vocabulary lacks.
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    fallback_ids_[b] = byte_fallback_ ? id_of(name) : -1;
  }
  has_byte_symbols_ = true;
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = id_of(byte_symbol(static_cast<std::uint8_t>(b)));
    has_byte_symbols_ &= byte_ids_[b] >= 0;
  }
}

void BpeModel::add_merge(std::int32_t a, std::int32_t b, Merge merge) {
  const std::uint64_t key = pair_key(a, b);
  for (std::size_t slot = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;; slot = (slot + 1) & (merge_keys_.size() - 1)) {
    if (merge_keys_[slot] == key) return;
    if (merge_keys_[slot] == kNoKey) {
      merge_keys_[slot] = key;
      merge_values_[slot] = merge;
      return;
    }
  }
}

std::int32_t BpeModel::id_of(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::string_view BpeModel::token(std::int32_t id) const {
  if (id < 0 || id >= size()) return {};
  return tokens_[static_cast<std::size_t>(id)];
}

void BpeModel::merge_symbols(std::vector<std::int32_t>& symbols) const {
  const auto n = static_cast<std::int32_t>(symbols.size());
  if (n < 2) return;
  // Short pieces (nearly every word): rescan the pairs after each merge; no allocation.
  constexpr std::int32_t kRescanUpTo = 16;
  if (n <= kRescanUpTo) {
    std::int32_t ranks[kRescanUpTo], results[kRescanUpTo];
    std::int32_t count = n;
    for (std::int32_t i = 0; i + 1 < count; ++i) {
      const Merge m = find_merge(symbols[static_cast<std::size_t>(i)], symbols[static_cast<std::size_t>(i) + 1]);
      ranks[i] = m.rank;
      results[i] = m.result;
    }
    for (;;) {
      std::int32_t best = -1;
      for (std::int32_t i = 0; i + 1 < count; ++i)
        if (ranks[i] >= 0 && (best < 0 || ranks[i] < ranks[best])) best = i;
      if (best < 0) break;
      symbols[static_cast<std::size_t>(best)] = results[best];
      for (std::int32_t i = best + 1; i + 1 < count; ++i) {
        symbols[static_cast<std::size_t>(i)] = symbols[static_cast<std::size_t>(i) + 1];
        ranks[i] = ranks[i + 1];
        results[i] = results[i + 1];
      }
      --count;
      for (std::int32_t i : {best - 1, best}) {
        if (i < 0 || i + 1 >= count) continue;
        const Merge m = find_merge(symbols[static_cast<std::size_t>(i)], symbols[static_cast<std::size_t>(i) + 1]);
        ranks[i] = m.rank;
        results[i] = m.result;
      }
    }
    symbols.resize(static_cast<std::size_t>(count));
    return;
  }
  std::vector<std::int32_t> prev(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    prev[static_cast<std::size_t>(i)] = i - 1;
    next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    std::int32_t rank, left, left_id, right_id, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto offer = [&](std::int32_t left) {
    const std::int32_t right = next[static_cast<std::size_t>(left)];
    if (left < 0 || right < 0) return;
    const std::int32_t a = symbols[static_cast<std::size_t>(left)], b = symbols[static_cast<std::size_t>(right)];
    const Merge m = find_merge(a, b);
    if (m.rank >= 0) heap.push({m.rank, left, a, b, m.result});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);
  std::vector<bool> gone(static_cast<std::size_t>(n), false);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto left = static_cast<std::size_t>(c.left);
    const std::int32_t right = next[left];
    // Stale: a symbol of the pair has merged since it was offered.
    if (gone[left] || right < 0 || symbols[left] != c.left_id || symbols[static_cast<std::size_t>(right)] != c.right_id) continue;
    symbols[left] = c.result;
    gone[static_cast<std::size_t>(right)] = true;
    next[left] = next[static_cast<std::size_t>(right)];
    if (next[left] >= 0) prev[static_cast<std::size_t>(next[left])] = c.left;
    if (prev[left] >= 0) offer(prev[left]);
    offer(c.left);
  }
  std::size_t kept = 0;
  for (std::int32_t i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) symbols[kept++] = symbols[static_cast<std::size_t>(i)];
  symbols.resize(kept);
}

bool BpeModel::cached(std::string_view key, std::vector<std::int32_t>& out) const {
  if (key.size() > kCachedPieceBytes) return false;
  const std::lock_guard lock(cache_mutex_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeModel::remember(std::string_view key, const std::vector<std::int32_t>& ids) const {
  if (key.size() > kCachedPieceBytes) return;
  const std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_.emplace(std::string(key), ids);
}

void BpeModel::encode_bytes(std::string_view bytes, std::vector<std::int32_t>& out) const {
  if (bytes.empty() || cached(bytes, out)) return;
  thread_local std::vector<std::int32_t> symbols;
  symbols.clear();
  if (ignore_merges_) {
    thread_local std::string spelled;
    spelled.clear();
    append_byte_symbols(bytes, spelled);
    if (const std::int32_t whole = id_of(spelled); whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  for (char c : bytes) symbols.push_back(byte_ids_[static_cast<std::uint8_t>(c)]);
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  remember(bytes, symbols);
}

void BpeModel::encode(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty() || cached(piece, out)) return;
  if (ignore_merges_)
    if (const std::int32_t whole = id_of(piece); whole >= 0) {
      out.push_back(whole);
      return;
    }
  std::vector<std::int32_t> symbols;
  symbols.reserve(piece.size());
  for (std::size_t at = 0; at < piece.size();) {
    const std::size_t start = at;
    next_code_point(piece, at);
    const std::string_view symbol = piece.substr(start, at - start);
    const std::int32_t id = id_of(symbol);
    if (id >= 0) {
      symbols.push_back(id);
      continue;
    }
    // Not in the vocabulary: its bytes' tokens (byte_fallback), else the unknown token (consecutive
    // ones fused with fuse_unk), as HF tokenizers' BPE does.
    bool all_bytes = byte_fallback_;
    for (char c : symbol) all_bytes = all_bytes && fallback_ids_[static_cast<std::uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : symbol) symbols.push_back(fallback_ids_[static_cast<std::uint8_t>(c)]);
    } else if (unk_id_ >= 0) {
      if (!(fuse_unk_ && !symbols.empty() && symbols.back() == unk_id_)) symbols.push_back(unk_id_);
    } else {
      throw InputError("tokenizer: the symbol " + std::string(symbol) +
                           " has no vocabulary entry, and the model has no byte_fallback or unk_token for it",
                       kExitBadContent);
    }
  }
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  remember(piece, symbols);
}

}  // namespace switchyard::text
