#include "text/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"
#include "core/json_input.h"
#include "text/byte_level.h"

#ifndef SWITCHYARD_HAVE_ICU
#define SWITCHYARD_HAVE_ICU 0
#endif
#if SWITCHYARD_HAVE_ICU
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#endif

namespace switchyard::text {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) { throw InputError(source + ": " + what, kExitBadContent); }

// GPT-2's own split, which a ByteLevel pre-tokenizer with use_regex applies first.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// `pattern` with each \p{Name} or \P{Name} that names a script spelled \p{sc:Name}. Oniguruma (HF
// tokenizers) and the Rust regex crate (tiktoken) read a bare script name as the Script property;
// PCRE2 10.40 and later read it as Script_Extensions, under which 、 and 。 are Han too (Kimi-K2's
// split tells them apart). General categories (\p{L}, \p{Lu}, ...), Any and the names that
// already say their property (sc:, scx:, gc=, ^) stay as written.
std::string with_scripts_as_script(const std::string& pattern) {
  static const std::set<std::string_view> kNotScripts = {
      "C",  "Cc", "Cf", "Cn", "Co", "Cs", "L",  "L&", "Ll", "Lm", "Lo", "Lt", "Lu", "M",  "Mc", "Me", "Mn", "N",  "Nd",
      "Nl", "No", "P",  "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S",  "Sc", "Sk", "Sm", "So", "Z",  "Zl", "Zp", "Zs",
      "Any", "Xan", "Xps", "Xsp", "Xwd", "Xuc", "LC"};
  std::string out;
  out.reserve(pattern.size());
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    out += pattern[i];
    if (pattern[i] != '\\' || i + 1 >= pattern.size()) continue;
    const char next = pattern[++i];
    out += next;
    if ((next != 'p' && next != 'P') || i + 1 >= pattern.size() || pattern[i + 1] != '{') continue;
    const std::size_t close = pattern.find('}', i + 2);
    if (close == std::string::npos) continue;  // PCRE2 reports it
    const std::string_view name(pattern.data() + i + 2, close - (i + 2));
    if (!kNotScripts.contains(name) && name.find_first_of(":=^") == std::string_view::npos) {
      out += "{sc:";
      out += name;
      out += '}';
      i = close;
    }
  }
  return out;
}

// A PCRE2 pattern in UTF and Unicode-property mode, JIT-compiled when the library can.
class UnicodeRegex {
 public:
  UnicodeRegex(const std::string& written, const std::string& where) {
    const std::string pattern = with_scripts_as_script(written);
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      bad(where, "the regex does not compile at offset " + std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
    // A pattern that backtracks catastrophically on some text stops with an error instead of hanging.
    context_ = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context_, kMatchLimit);
    pcre2_set_depth_limit(context_, kMatchLimit);
    pcre2_set_heap_limit(context_, kHeapLimitKib);
    where_ = where;
  }
  ~UnicodeRegex() {
    pcre2_match_context_free(context_);
    pcre2_code_free(code_);
  }
  UnicodeRegex(const UnicodeRegex&) = delete;
  UnicodeRegex& operator=(const UnicodeRegex&) = delete;

  // Calls found(start, end) for each non-overlapping match of valid UTF-8 `text`, leftmost first.
  template <typename Found>
  void each_match(std::string_view text, Found&& found) const {
    thread_local struct Data {
      pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
      ~Data() { pcre2_match_data_free(data); }
    } match;
    std::size_t at = 0;
    while (at <= text.size()) {
      // The text was checked as UTF-8 once; each match need not check it again.
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at, PCRE2_NO_UTF_CHECK,
                           match.data, context_);
      // The JIT's stack (32 KiB) runs out on a repeated group over a long text ("(?:a|b)+" on
      // 30,000 letters) that is no runaway; the interpreter keeps its frames on the heap, within
      // the match, depth and heap limits.
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         match.data, context_);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
          rc == PCRE2_ERROR_NOMEMORY)
        throw InputError(where_ + ": the regex exceeded its backtracking limit on this text (catastrophic backtracking); "
                                  "the tokenizer's pattern needs fixing",
                         kExitBadContent);
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw InputError(where_ + ": the regex failed on the text: " + reinterpret_cast<const char*>(message),
                         kExitBadContent);
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
      const std::size_t start = ovector[0], end = ovector[1];
      if (end > start) found(start, end);
      if (end > at) {
        at = end;
      } else {  // an empty match: step over one code point
        std::size_t next = end;
        if (next >= text.size()) return;
        next_code_point(text, next);
        at = next;
      }
    }
  }

 private:
  // Steps of one match: real pre-tokenizer patterns take a few per character.
  static constexpr std::uint32_t kMatchLimit = 10'000'000;
  // The interpreter's backtracking frames, per match (PCRE2's own default is 20 GB).
  static constexpr std::uint32_t kHeapLimitKib = 256 * 1024;
  pcre2_code* code_ = nullptr;
  pcre2_match_context* context_ = nullptr;
  std::string where_;
};

// Throws unless all of `text` is strict UTF-8: PCRE2 matches it with PCRE2_NO_UTF_CHECK, which
// is undefined behaviour on anything else (a code point past U+10FFFF, a surrogate, an overlong form).
void require_utf8(std::string_view text) {
  std::size_t bad_at = 0;
  if (!valid_utf8(text, &bad_at))
    throw InputError("tokenizer: the text is not valid UTF-8 (at byte " + std::to_string(bad_at) + ")");
}

}  // namespace

struct PreTokenizer::Step {
  enum class Kind { split, byte_level } kind;
  std::unique_ptr<UnicodeRegex> regex;  // split; byte_level with use_regex
  // Split: which pieces stay. Isolated keeps the matches and the text between them; Removed keeps
  // the text between, or, inverted, only the matches (GPT-4o's tokenizer.json says so).
  bool keep_matches = true, keep_gaps = true;
  bool add_prefix_space = false;        // byte_level
};

namespace {

void add_steps(const nlohmann::json& spec, const std::string& source, std::vector<std::unique_ptr<PreTokenizer::Step>>& steps);

}  // namespace

PreTokenizer::PreTokenizer(const nlohmann::json& spec, const std::string& source) {
  if (!spec.is_null()) add_steps(spec, source, steps_);
}
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

std::string type_of(const nlohmann::json& spec) {
  const auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const nlohmann::json& spec, const char* name, bool fallback) {
  const auto it = spec.find(name);
  return it != spec.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

void add_steps(const nlohmann::json& spec, const std::string& source, std::vector<std::unique_ptr<PreTokenizer::Step>>& steps) {
  const std::string where = source + ": pre_tokenizer";
  if (!spec.is_object()) bad(where, "is not an object");
  const std::string type = type_of(spec);
  if (type == "Sequence") {
    const auto list = spec.find("pretokenizers");
    if (list == spec.end() || !list->is_array()) bad(where, "Sequence has no list of pretokenizers");
    for (const auto& each : *list) add_steps(each, source, steps);
    return;
  }
  auto step = std::make_unique<PreTokenizer::Step>();
  if (type == "Split") {
    step->kind = PreTokenizer::Step::Kind::split;
    // {"Regex": pattern} is used as it is; {"String": text} matches that text literally.
    const auto pattern = spec.find("pattern");
    const nlohmann::json* regex_spec = nullptr;
    const nlohmann::json* literal_spec = nullptr;
    if (pattern != spec.end() && pattern->is_object()) {
      const auto r = pattern->find("Regex"), l = pattern->find("String");
      if (r != pattern->end() && r->is_string()) regex_spec = &*r;
      else if (l != pattern->end() && l->is_string()) literal_spec = &*l;
    }
    if (regex_spec == nullptr && literal_spec == nullptr)
      bad(where, "Split needs a pattern {\"Regex\": ...} or {\"String\": ...}");
    std::string regex;
    if (regex_spec != nullptr) {
      regex = regex_spec->get<std::string>();
    } else {
      for (char c : literal_spec->get_ref<const std::string&>()) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) regex += '\\';
        regex += c;
      }
    }
    if (regex.empty()) bad(where, "Split's pattern is empty");
    if (!valid_utf8(regex)) bad(where, "Split's pattern " + quoted_excerpt(regex) + " is not valid UTF-8");
    const auto behavior_at = spec.find("behavior");
    const std::string behavior = behavior_at != spec.end() && behavior_at->is_string() ? behavior_at->get<std::string>() : "";
    if (behavior != "Isolated" && behavior != "Removed")
      bad(where, "Split behavior " + json_excerpt(spec.value("behavior", nlohmann::json())) +
                     " is not supported (Isolated, Removed)");
    // invert: the gaps are the delimiters. Isolated keeps both either way.
    const bool invert = flag(spec, "invert", false);
    step->keep_matches = behavior == "Isolated" || invert;
    step->keep_gaps = behavior == "Isolated" || !invert;
    step->regex = std::make_unique<UnicodeRegex>(regex, where + " Split");
  } else if (type == "ByteLevel") {
    step->kind = PreTokenizer::Step::Kind::byte_level;
    step->add_prefix_space = flag(spec, "add_prefix_space", true);
    if (flag(spec, "use_regex", true)) step->regex = std::make_unique<UnicodeRegex>(kGpt2Pattern, where + " ByteLevel");
  } else {
    bad(where, "type " + json_excerpt(spec.value("type", nlohmann::json())) +
                   " is not supported (Sequence, Split, ByteLevel)");
  }
  steps.push_back(std::move(step));
}

}  // namespace

bool PreTokenizer::byte_level() const { return !steps_.empty() && steps_.back()->kind == Step::Kind::byte_level; }

void PreTokenizer::split(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  require_utf8(text);
  for (std::size_t i = 0; i + 1 < steps_.size(); ++i)
    if (steps_[i]->kind == Step::Kind::byte_level)
      throw InputError("tokenizer: a pre-tokenizer step after ByteLevel is not supported", kExitBadContent);
  // Pieces as (offset, length) into `text`.
  thread_local std::vector<std::pair<std::size_t, std::size_t>> pieces, next;
  pieces.assign(1, {0, text.size()});
  bool prefix_space = false;
  auto split_by = [&](const UnicodeRegex& regex, bool keep_matches, bool keep_gaps) {
    next.clear();
    for (const auto& piece_at : pieces) {
      const std::size_t offset = piece_at.first, length = piece_at.second;  // named: a lambda below uses them
      std::size_t last = 0;
      regex.each_match(text.substr(offset, length), [&](std::size_t start, std::size_t end) {
        if (start > last && keep_gaps) next.emplace_back(offset + last, start - last);
        if (keep_matches) next.emplace_back(offset + start, end - start);
        last = end;
      });
      if (last < length && keep_gaps) next.emplace_back(offset + last, length - last);
    }
    pieces.swap(next);
  };
  for (const auto& step : steps_) {
    if (step->regex) split_by(*step->regex, step->keep_matches, step->keep_gaps);
    if (step->kind == Step::Kind::byte_level) prefix_space = step->add_prefix_space;
  }
  std::string with_space;
  for (const auto& [offset, length] : pieces) {
    const std::string_view p = text.substr(offset, length);
    if (prefix_space && (p.empty() || p.front() != ' ')) {
      with_space.assign(1, ' ');
      with_space += p;
      piece(with_space);
    } else {
      piece(p);
    }
  }
}

Normalizer::Normalizer(const nlohmann::json& spec, const std::string& source) {
  const std::string where = source + ": normalizer";
  std::vector<const nlohmann::json*> todo{&spec};
  while (!todo.empty()) {
    const nlohmann::json& s = *todo.front();
    todo.erase(todo.begin());
    if (s.is_null()) continue;
    if (!s.is_object()) bad(where, "is not an object");
    const std::string type = type_of(s);
    if (type == "Sequence") {
      const auto list = s.find("normalizers");
      if (list == s.end() || !list->is_array()) bad(where, "Sequence has no list of normalizers");
      std::vector<const nlohmann::json*> inner;
      for (const auto& each : *list) inner.push_back(&each);
      todo.insert(todo.begin(), inner.begin(), inner.end());
    } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
      if (!SWITCHYARD_HAVE_ICU)
        bad(where, type + " needs Unicode normalization, which this build lacks (configure with ICU: libicu-dev)");
      steps_.push_back({type, "", ""});
    } else if (type == "Prepend") {
      const auto prepend = s.find("prepend");
      if (prepend == s.end() || !prepend->is_string()) bad(where, "Prepend has no string \"prepend\"");
      steps_.push_back({type, "", prepend->get<std::string>()});
    } else if (type == "Replace") {
      const auto pattern = s.find("pattern");
      const auto content = s.find("content");
      if (pattern == s.end() || !pattern->is_object() || content == s.end() || !content->is_string())
        bad(where, "Replace needs a pattern object and a string content");
      const auto literal = pattern->find("String");
      if (literal == pattern->end() || !literal->is_string() || literal->get_ref<const std::string&>().empty())
        bad(where, "Replace pattern " + json_excerpt(*pattern) + " is not supported (a non-empty String)");
      steps_.push_back({type, literal->get<std::string>(), content->get<std::string>()});
    } else {
      bad(where, "type " + json_excerpt(s.value("type", nlohmann::json())) +
                     " is not supported (Sequence, NFC, NFD, NFKC, NFKD, Prepend, Replace)");
    }
  }
}

namespace {

#if SWITCHYARD_HAVE_ICU
std::string unicode_normalized(const std::string& text, const std::string& form) {
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = form == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                              : form == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                              : form == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                               : icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status)) throw InputError("tokenizer: ICU has no " + form + " normalizer: " + u_errorName(status));
  // Text already in the form (the common case) is returned as it is.
  if (n->isNormalized(s, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  s = n->normalize(s, status);
  if (U_FAILURE(status)) throw InputError("tokenizer: " + form + " normalization failed: " + u_errorName(status));
  std::string out;
  s.toUTF8String(out);
  return out;
}
#endif

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  if (steps_.empty()) return std::string(text);
  require_utf8(text);
  std::string out(text);
  for (const Step& step : steps_) {
    if (step.type == "Prepend") {
      if (!out.empty()) out.insert(0, step.to);
    } else if (step.type == "Replace") {
      out = replace_all(out, step.from, step.to);
    } else {
#if SWITCHYARD_HAVE_ICU
      out = unicode_normalized(out, step.type);
#endif
    }
  }
  return out;
}

}  // namespace switchyard::text
