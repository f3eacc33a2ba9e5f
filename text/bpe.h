#pragma once
// The BPE model of a tokenizer.json ("model": {"type": "BPE"}): a vocabulary of token strings
// (spelled in the byte-level alphabet, text/byte_level.h) and a ranked list of merges. A piece is
// split into its code points, then the adjacent pair of lowest rank is merged, leftmost first,
// until no pair has a merge: HF tokenizers' algorithm, in O(n log n) for a piece of n symbols
// (a heap of candidate pairs), so a megabyte-long word costs a fraction of a second, not hours.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard::text {

class BpeModel {
 public:
  // From the "model" object; `source` names the file for errors. Throws InputError
  // (kExitBadContent) naming the entry for a vocabulary or a merge that is not what the format
  // says (a merge whose parts or result are not in the vocabulary, an id out of range), and for
  // options this implementation does not have (dropout, an end-of-word suffix, a subword prefix).
  // byte_fallback (sentencepiece-style BPE, Llama's and Mixtral's): a character the vocabulary
  // lacks becomes the tokens of its bytes, "<0xE3>" ...; without it, unk_token (fuse_unk: one for
  // a run of them). ignore_merges (Llama 3's): a piece that is a vocabulary entry as a whole is
  // that one token, whatever the merges would make of it.
  BpeModel(const nlohmann::json& model, const std::string& source);

  // Appends the ids of one pre-tokenized piece spelled in code points (each one symbol). A code
  // point with no vocabulary entry, no byte tokens and no unk_token is an InputError (kExitBadContent).
  void encode(std::string_view piece, std::vector<std::int32_t>& out) const;
  // The same for a piece of raw bytes that a ByteLevel pre-tokenizer would spell: each byte is
  // the symbol of its byte-level code point (text/byte_level.h), looked up in a 256-entry table.
  // Requires has_byte_symbols().
  void encode_bytes(std::string_view bytes, std::vector<std::int32_t>& out) const;
  // Whether the vocabulary holds every byte's byte-level symbol.
  bool has_byte_symbols() const { return has_byte_symbols_; }

  // id -> token string; "" for an id the vocabulary lacks. The vocabulary holds ids [0, size()).
  std::string_view token(std::int32_t id) const;
  std::int32_t size() const { return static_cast<std::int32_t>(tokens_.size()); }
  // token string -> id, or -1.
  std::int32_t id_of(std::string_view token) const;

 private:
  struct Merge {
    std::int32_t rank = -1, result = 0;  // rank -1: no merge
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  // The merge of (a, b): open addressing in a power-of-two table, one multiply to hash, since
  // a lookup per adjacent pair is most of BPE's time.
  Merge find_merge(std::int32_t a, std::int32_t b) const {
    const std::uint64_t key = pair_key(a, b);
    for (std::size_t slot = (key * 0x9E3779B97F4A7C15ull) >> merge_shift_;; slot = (slot + 1) & (merge_keys_.size() - 1)) {
      if (merge_keys_[slot] == key) return merge_values_[slot];
      if (merge_keys_[slot] == kNoKey) return {};
    }
  }
  void add_merge(std::int32_t a, std::int32_t b, Merge merge);
  void merge_symbols(std::vector<std::int32_t>& symbols) const;
  bool cached(std::string_view key, std::vector<std::int32_t>& out) const;
  void remember(std::string_view key, const std::vector<std::int32_t>& ids) const;

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;
  StringMap ids_;
  std::vector<std::string> tokens_;
  static constexpr std::uint64_t kNoKey = ~std::uint64_t{0};
  std::vector<std::uint64_t> merge_keys_;
  std::vector<Merge> merge_values_;
  int merge_shift_ = 64;
  std::int32_t byte_ids_[256] = {};
  bool has_byte_symbols_ = false;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::int32_t unk_id_ = -1;
  std::int32_t fallback_ids_[256] = {};  // "<0xHH>"'s id, or -1
  // Pieces seen before (most words repeat): bounded, cleared when full.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
  static constexpr std::size_t kCacheEntries = 1 << 17;
  static constexpr std::size_t kCachedPieceBytes = 256;
};

}  // namespace switchyard::text
