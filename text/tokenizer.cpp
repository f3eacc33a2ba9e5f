#include "text/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"
#include "core/gguf.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/gguf_vocabulary.h"
#include "text/pre_tokenizer.h"

namespace switchyard::text {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) { throw InputError(source + ": " + what, kExitBadContent); }

std::string type_of(const nlohmann::json& spec) {
  const auto it = spec.is_object() ? spec.find("type") : spec.end();
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A member of a JSON object, or null where `j` is not an object or lacks it: hostile files may hold
// anything where a field is expected, and nlohmann's value() throws on a mismatch.
const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null;
  if (!j.is_object()) return null;
  const auto it = j.find(key);
  return it == j.end() ? null : *it;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

bool is_gguf_tokenizer_path(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return path.extension() == ".gguf";
  return !std::filesystem::exists(path / "tokenizer.json", error) &&
         std::any_of(std::filesystem::directory_iterator(path, error), std::filesystem::directory_iterator(),
                     [](const std::filesystem::directory_entry& e) { return e.path().extension() == ".gguf"; });
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  if (is_gguf_tokenizer_path(path)) return from_gguf(GgufFile::open(path));
  std::error_code error;
  const std::filesystem::path file = std::filesystem::is_directory(path, error) ? path / "tokenizer.json" : path;
  const std::string text = read_input_file(file, "tokenizer", kMaxTokenizerJsonBytes);
  return from_json(text, file.string());
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  return from_json(tokenizer_json_from_gguf(file), file.files().front().string());
}

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& source) {
  const nlohmann::json root = parse_json<nlohmann::json>(json, source);
  if (!root.is_object()) bad(source, "not a tokenizer.json (the top level is not an object)");
  Tokenizer t;
  const auto model = root.find("model");
  if (model == root.end()) bad(source, "no \"model\"");
  t.model_ = std::make_unique<BpeModel>(*model, source);
  t.normalizer_ = std::make_unique<Normalizer>(root.value("normalizer", nlohmann::json()), source);
  t.pre_tokenizer_ = std::make_unique<PreTokenizer>(root.value("pre_tokenizer", nlohmann::json()), source);
  t.read_decoder(root.value("decoder", nlohmann::json()), source);
  // Byte-level: every byte's symbol must be a token, or some text cannot be encoded.
  if (t.byte_level_decoder_ || t.pre_tokenizer_->byte_level())
    for (int b = 0; b < 256; ++b)
      if (t.model_->id_of(byte_symbol(static_cast<std::uint8_t>(b))) < 0)
        bad(source, "model: the vocabulary lacks the byte-level symbol of byte " + std::to_string(b));

  t.vocab_size_ = t.model_->size();
  const nlohmann::json added = root.value("added_tokens", nlohmann::json::array());
  if (!added.is_array()) bad(source, "added_tokens is not a list");
  for (const auto& entry : added) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() || !entry.contains("content") ||
        !entry["content"].is_string() || entry["content"].get_ref<const std::string&>().empty())
      bad(source, "added token " + json_excerpt(entry) + " needs an integer id and a non-empty content");
    const std::int64_t id = entry["id"].get<std::int64_t>();
    if (id < 0 || id >= (std::int64_t{1} << 24)) bad(source, "added token id " + std::to_string(id) + " is out of range");
    for (const char* option : {"lstrip", "rstrip", "single_word"})
      if (member(entry, option) == true) bad(source, "added token " + json_excerpt(entry["content"]) + ": " + option + " is not supported");
    t.added_.push_back({static_cast<std::int32_t>(id), entry["content"].get<std::string>(), member(entry, "special") == true});
    t.vocab_size_ = std::max(t.vocab_size_, static_cast<std::int32_t>(id + 1));
  }
  t.added_index_.assign(static_cast<std::size_t>(t.vocab_size_), -1);
  t.added_by_byte_.resize(256);
  for (std::size_t i = 0; i < t.added_.size(); ++i) {
    t.added_index_[static_cast<std::size_t>(t.added_[i].id)] = static_cast<std::int32_t>(i);
    t.added_by_byte_[static_cast<std::uint8_t>(t.added_[i].content[0])].push_back(static_cast<std::int32_t>(i));
  }
  for (auto& list : t.added_by_byte_)
    std::stable_sort(list.begin(), list.end(), [&](std::int32_t a, std::int32_t b) {
      return t.added_[static_cast<std::size_t>(a)].content.size() > t.added_[static_cast<std::size_t>(b)].content.size();
    });

  // Post-processor: ByteLevel adds nothing; TemplateProcessing's single template puts special
  // tokens around the sequence.
  const nlohmann::json post = root.value("post_processor", nlohmann::json());
  std::vector<const nlohmann::json*> processors;
  if (type_of(post) == "Sequence" && post.contains("processors") && post["processors"].is_array())
    for (const auto& p : post["processors"]) processors.push_back(&p);
  else if (!post.is_null())
    processors.push_back(&post);
  for (const nlohmann::json* p : processors) {
    const std::string type = type_of(*p);
    if (type == "ByteLevel") continue;
    if (type != "TemplateProcessing") bad(source, "post_processor " + json_excerpt(p->value("type", nlohmann::json())) + " is not supported (ByteLevel, TemplateProcessing)");
    const nlohmann::json single = p->value("single", nlohmann::json());
    const nlohmann::json specials = p->value("special_tokens", nlohmann::json::object());
    if (!single.is_array()) bad(source, "post_processor: TemplateProcessing has no single template");
    bool after = false;
    for (const auto& piece : single) {
      if (piece.contains("Sequence")) {
        after = true;
        continue;
      }
      const auto special = piece.find("SpecialToken");
      const auto special_id = special == piece.end() ? piece.end() : special->find("id");
      if (special == piece.end() || special_id == special->end() || !special_id->is_string())
        bad(source, "post_processor: template piece " + json_excerpt(piece) + " is not understood");
      const std::string name = special_id->get<std::string>();
      const auto ids = specials.find(name);
      const auto id_list = ids == specials.end() ? specials.end() : ids->find("ids");
      if (ids == specials.end() || id_list == ids->end() || !id_list->is_array())
        bad(source, "post_processor: the template's special token " + quoted_excerpt(name) + " has no ids");
      for (const auto& id : *id_list) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX)
          bad(source, "post_processor: the special token " + quoted_excerpt(name) + " has an id " + json_excerpt(id) +
                          " that is not a token id");
        (after ? t.suffix_ids_ : t.prefix_ids_).push_back(id.get<std::int32_t>());
      }
    }
  }
  return t;
}

void Tokenizer::read_decoder(const nlohmann::json& decoder, const std::string& source) {
  const std::string type = type_of(decoder);
  if (type == "ByteLevel") {
    byte_level_decoder_ = true;
    return;
  }
  auto unsupported = [&](const nlohmann::json& d) {
    bad(source, "decoder " + (d.is_null() ? std::string("null") : json_excerpt(member(d, "type"))) +
                    " is not supported (ByteLevel; or sentencepiece's Replace, ByteFallback, Fuse, Strip, Metaspace)");
  };
  // Sentencepiece-style: the steps of a Sequence, in order. Tokens are decoded one at a time, so a
  // Strip is honoured only after Fuse (then it strips the whole text's start, once).
  std::vector<nlohmann::json> steps;
  if (type == "Sequence" && decoder.contains("decoders") && decoder["decoders"].is_array())
    for (const auto& d : decoder["decoders"]) steps.push_back(d);
  else if (type == "Metaspace" || type == "Replace" || type == "ByteFallback")
    steps.push_back(decoder);
  else
    unsupported(decoder);
  bool fused = false;
  for (const nlohmann::json& d : steps) {
    const std::string step = type_of(d);
    if (step == "Replace") {
      const nlohmann::json& literal = member(member(d, "pattern"), "String");
      const nlohmann::json& content = member(d, "content");
      if (!literal.is_string() || !content.is_string() || literal.get_ref<const std::string&>().empty())
        bad(source, "decoder: Replace " + json_excerpt(d) + " is not supported (a non-empty String pattern)");
      decode_replaces_.emplace_back(literal.get<std::string>(), content.get<std::string>());
    } else if (step == "ByteFallback") {
      decode_byte_fallback_ = true;
    } else if (step == "Fuse") {
      fused = true;
    } else if (step == "Strip") {
      const nlohmann::json &content = member(d, "content"), &start = member(d, "start"), &stop = member(d, "stop");
      if (!fused || content != " " || !(stop.is_null() || stop == 0) || !start.is_number_integer() ||
          start.get<std::int64_t>() < 0 || start.get<std::int64_t>() > 1024)
        bad(source, "decoder: Strip " + json_excerpt(d) + " is not supported (after Fuse, of up to 1024 spaces at the start)");
      strip_leading_ = static_cast<int>(start.get<std::int64_t>());
    } else if (step == "Metaspace") {
      const nlohmann::json &replacement = member(d, "replacement"), &scheme = member(d, "prepend_scheme"),
                           &prefix = member(d, "add_prefix_space");
      const bool named = replacement.is_string() && !replacement.get_ref<const std::string&>().empty();
      decode_replaces_.emplace_back(named ? replacement.get<std::string>() : std::string("\u2581"), " ");
      if (scheme != "never" && prefix != false) strip_leading_ = 1;
    } else {
      unsupported(d);
    }
  }
}

bool Tokenizer::is_special(std::int32_t id) const {
  if (id < 0 || id >= vocab_size_) return false;
  const std::int32_t index = added_index_[static_cast<std::size_t>(id)];
  return index >= 0 && added_[static_cast<std::size_t>(index)].special;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  const std::string normalized = normalizer_->identity() ? std::string() : normalizer_->apply(text);
  const std::string_view input = normalizer_->identity() ? text : std::string_view(normalized);
  if (pre_tokenizer_->byte_level()) pre_tokenizer_->split(input, [&](std::string_view piece) { model_->encode_bytes(piece, out); });
  else pre_tokenizer_->split(input, [&](std::string_view piece) { model_->encode(piece, out); });
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<std::int32_t> out;
  if (add_special) out = prefix_ids_;
  std::size_t plain_from = 0;
  for (std::size_t at = 0; at < text.size();) {
    const AddedToken* found = nullptr;
    for (std::int32_t index : added_by_byte_[static_cast<std::uint8_t>(text[at])]) {
      const AddedToken& candidate = added_[static_cast<std::size_t>(index)];
      if (text.compare(at, candidate.content.size(), candidate.content) == 0) {
        found = &candidate;  // the longest, since the list is longest first
        break;
      }
    }
    if (!found) {
      ++at;
      continue;
    }
    encode_plain(text.substr(plain_from, at - plain_from), out);
    out.push_back(found->id);
    at += found->content.size();
    plain_from = at;
  }
  encode_plain(text.substr(plain_from), out);
  if (add_special) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
  return out;
}

std::string_view Tokenizer::token(std::int32_t id) const {
  if (id >= 0 && id < vocab_size_) {
    const std::int32_t index = added_index_[static_cast<std::size_t>(id)];
    if (index >= 0) return added_[static_cast<std::size_t>(index)].content;
  }
  return model_->token(id);
}

std::string Tokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary (0 to " + std::to_string(vocab_size_ - 1) + ")");
  const std::int32_t index = added_index_[static_cast<std::size_t>(id)];
  if (index >= 0) return added_[static_cast<std::size_t>(index)].content;
  const std::string_view symbols = model_->token(id);
  if (symbols.empty()) throw InputError("token id " + std::to_string(id) + " has no vocabulary entry");
  std::string out;
  if (byte_level_decoder_) {
    if (!append_symbol_bytes(symbols, out)) return std::string(symbols);  // not byte-level spelled: as it is
    return out;
  }
  // Sentencepiece: "<0xHH>" is byte HH; other tokens have their replacements applied ("▁" -> " ").
  if (decode_byte_fallback_ && symbols.size() == 6 && symbols.starts_with("<0x") && symbols.back() == '>') {
    unsigned value = 0;
    if (std::sscanf(std::string(symbols.substr(3, 2)).c_str(), "%2x", &value) == 1) return std::string(1, static_cast<char>(value));
  }
  out = symbols;
  for (const auto& [from, to] : decode_replaces_) out = replace_all(out, from, to);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special,
                              std::vector<std::size_t>* token_ends) const {
  std::string out;
  if (token_ends) token_ends->clear();
  for (std::int32_t id : ids) {
    if (!(skip_special && is_special(id))) out += token_bytes(id);
    if (token_ends) token_ends->push_back(out.size());
  }
  std::size_t strip = 0;
  while (strip < out.size() && strip < static_cast<std::size_t>(strip_leading_) && out[strip] == ' ') ++strip;
  // A prefix of e bytes loses min(e, strip) to the decoder's Strip: it is spaces as far as the
  // whole text's leading spaces go.
  if (token_ends)
    for (std::size_t& end : *token_ends) end -= std::min(end, strip);
  return out.substr(strip);
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  // Look back at most 3 bytes for the lead byte of a character that is not yet whole.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto b = static_cast<std::uint8_t>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    const std::size_t length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    return length > back ? n - back : n;
  }
  return n;
}

std::string StreamDecoder::push(std::int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  std::string bytes = tokenizer_.token_bytes(id);
  // The decoder's Strip: the stream's first spaces, as decode() strips the text's.
  while (strip_left_ > 0 && !bytes.empty()) {
    if (bytes[0] != ' ') {
      strip_left_ = 0;
      break;
    }
    bytes.erase(0, 1);
    --strip_left_;
  }
  pending_ += bytes;
  const std::size_t whole = complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, whole);
  pending_.erase(0, whole);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  if (!pending_.empty()) out = "\xEF\xBF\xBD";  // U+FFFD for a character the stream never completed
  pending_.clear();
  return out;
}

}  // namespace switchyard::text
