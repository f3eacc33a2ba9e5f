#include "placement/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <streambuf>
#include <unordered_map>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include "core/text.h"

namespace switchyard {
namespace {

constexpr std::string_view kCoreTagPrefix = "tag:yaml.org,2002:";
constexpr std::string_view kPyYaml = "PyYAML, which ktransformers uses,";

std::string millions(std::size_t count) { return std::to_string(count / 1'000'000) + " M"; }
std::string mebibytes(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string hex(unsigned value, int digits) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) out[static_cast<std::size_t>(i)] = kDigits[value & 0xF];
  return out;
}

// --- characters ---

// The characters a YAML stream may hold (YAML 1.1 c-printable); PyYAML's reader refuses the rest.
bool yaml_printable(char32_t c) {
  return c == 0x09 || c == 0x0A || c == 0x0D || (c >= 0x20 && c <= 0x7E) || c == 0x85 || (c >= 0xA0 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

SourceLocation location_of(std::string_view text, std::size_t offset, const std::string& file) {
  const std::size_t end = std::min(offset, text.size());
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < end; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return SourceLocation{file, line, static_cast<int>(end - line_start) + 1};
}

// Refuses, at its first offending byte, text that is not UTF-8 or holds a character YAML forbids.
bool check_characters(std::string_view text, const std::string& file, Diagnostics& diagnostics) {
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const std::size_t length = decode_utf8(text, i, c);
    if (length == 0) {
      diagnostics.error("yaml-bad-character",
                        "byte 0x" + hex(static_cast<unsigned char>(text[i]), 2) +
                            " is not UTF-8; a profile is UTF-8 text (is this the right file?)",
                        location_of(text, i, file));
      return false;
    }
    if (!yaml_printable(c)) {
      diagnostics.error("yaml-bad-character",
                        "character U+" + hex(static_cast<unsigned>(c), 4) +
                            " (a control character or a non-character) is not allowed in a YAML file (" +
                            std::string(kPyYaml) + " refuses it too); remove it",
                        location_of(text, i, file));
      return false;
    }
    i += length;
  }
  return true;
}

// yaml-cpp's own message, which may quote the text (an undefined anchor's name), cut to a line.
std::string yaml_cpp_message(const std::string& message) { return printable_excerpt(message, 200); }

// --- scalars ---

// What an untagged plain scalar is: PyYAML tries bool, float, int (by its first character); the
// rest, timestamps included, are strings here. Null words never get here: yaml-cpp reports them as
// nulls.
YamlKind implicit_kind(std::string_view text) {
  if (parse_yaml_bool(text)) return YamlKind::boolean;
  if (is_yaml_float(text)) return YamlKind::floating;
  if (parse_yaml_integer(text)) return YamlKind::integer;
  return YamlKind::string;
}

std::string tag_as_written(std::string_view tag) {
  if (starts_with(tag, kCoreTagPrefix)) return "!!" + std::string(tag.substr(kCoreTagPrefix.size()));
  if (!tag.empty() && tag[0] == '!') return std::string(tag);
  return "!<" + std::string(tag) + ">";
}

std::string describe(const YamlNode& node) {
  switch (node.kind) {
    case YamlKind::mapping: return "a mapping";
    case YamlKind::sequence: return "a list";
    case YamlKind::null: return "nothing";
    default: return quoted_excerpt(node.text);
  }
}

// A key's identity as a Python dict sees it: 1, 0x1, 01 and 1.0 are one key (and true is 1).
std::string key_identity(const YamlNode& key) {
  switch (key.kind) {
    case YamlKind::null: return "n";
    case YamlKind::boolean: return *yaml_boolean(key) ? "i1" : "i0";
    case YamlKind::integer: {
      const YamlInteger value = *yaml_integer(key);
      return value.out_of_range ? "I" + key.text : "i" + std::to_string(value.value);
    }
    case YamlKind::floating: {
      const auto value = yaml_float_value(key.text);
      if (!value) return "F" + key.text;  // inf, nan: by their spelling
      if (std::nearbyint(*value) == *value && std::fabs(*value) < 9e18)
        return "i" + std::to_string(static_cast<long long>(*value));
      char buffer[32];
      const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, *value);
      return "f" + std::string(buffer, ec == std::errc() ? end : buffer);
    }
    default: return "s" + key.text;
  }
}

// --- the reader ---

struct StopReading {};     // thrown out of yaml-cpp once a broken limit is reported
struct SecondDocument {};  // thrown out of yaml-cpp at the start of a second document

// Nodes counted with every alias expanded, saturating just past the limits.
struct Expanded {
  std::size_t nodes = 1;
  std::size_t bytes = 0;
  Expanded& operator+=(const Expanded& other) {
    nodes = std::min(nodes + other.nodes, kMaxYamlAliasNodes + 1);
    bytes = std::min(bytes + other.bytes, kMaxYamlAliasBytes + 1);
    return *this;
  }
};

// Builds the tree from yaml-cpp's events, one open collection per frame: no recursion, so the depth
// costs no stack, and every limit is checked as the event arrives.
class TreeBuilder final : public YAML::EventHandler {
 public:
  TreeBuilder(std::string_view text, const std::string& file, Diagnostics& diagnostics, std::deque<YamlNode>& nodes)
      : text_(text), file_(file), diagnostics_(diagnostics), nodes_(nodes) {
    if (starts_with(text, "\xEF\xBB\xBF")) bom_bytes_ = 3;  // yaml-cpp's positions start after a BOM
  }

  const YamlNode* root() const { return root_; }
  // The position (in yaml-cpp's stream) of the last event: how far yaml-cpp has reported.
  const std::size_t& reported_offset() const { return reported_offset_; }
  std::size_t text_offset(std::size_t stream_offset) const { return stream_offset + bom_bytes_; }
  SourceLocation location_of_reported() const { return location_of(text_, text_offset(reported_offset_), file_); }

  // One line for the problems past kMaxProfileProblems, which were counted but not listed.
  void report_unlisted() {
    if (problems_ > kMaxProfileProblems)
      diagnostics_.error("yaml-more-problems",
                         std::to_string(problems_ - kMaxProfileProblems) +
                             " more YAML problems like the ones above are not listed; fix those first",
                         SourceLocation{file_, 0, 0});
  }

  void OnDocumentStart(const YAML::Mark& mark) override {
    touch(mark);
    if (documents_++ == 0) return;
    problem("yaml-second-document",
            "a second YAML document starts here; a profile is one document (" + std::string(kPyYaml) +
                " refuses more): remove the '---' and what follows, or merge the rules into one list",
            at(mark));
    throw SecondDocument{};
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    touch(mark);
    leaf(make(mark, YamlKind::null), anchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    touch(mark);
    YamlNode& node = make(mark, YamlKind::string);
    node.text = value;
    const std::size_t at_text = text_offset(static_cast<std::size_t>(std::max(mark.pos, 0)));
    node.quoted = at_text < text_.size() && (text_[at_text] == '"' || text_[at_text] == '\'');
    if (!valid_utf8(node.text)) {  // the text was checked; only an escape could make this, kept as a guard
      problem("yaml-bad-character", "this value is not valid UTF-8 once its escapes are resolved", at(mark));
      node.text = "?";
    }
    node.kind = scalar_kind(tag, node, mark);
    leaf(node, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    touch(mark);
    if (anchor >= anchors_.size() || !anchors_[anchor].node)  // yaml-cpp refuses unknown anchors first
      stop("yaml-syntax", "YAML syntax error: an alias to an anchor that is not defined", mark);
    const Anchor& target = anchors_[anchor];
    const std::string name = quoted_excerpt("*" + target.name);
    if (target.open) {
      problem("yaml-recursive-alias",
              "alias " + name + " refers to the list or mapping it is in (anchored at line " +
                  std::to_string(target.node->line) + ", column " + std::to_string(target.node->column) +
                  "): a recursive structure cannot be a profile value",
              at(mark));
      attach(&make(mark, YamlKind::null), Expanded{});
      return;
    }
    alias_total_ += target.size;
    if (alias_total_.nodes > kMaxYamlAliasNodes)
      stop("yaml-alias-expansion",
           "alias expansion past " + millions(kMaxYamlAliasNodes) + " nodes: with alias " + name +
               " the aliases repeat more than " + std::to_string(kMaxYamlAliasNodes) +
               " nodes (an alias bomb?); a profile's aliases repeat a few values",
           mark);
    if (alias_total_.bytes > kMaxYamlAliasBytes)
      stop("yaml-alias-expansion",
           "alias expansion past " + mebibytes(kMaxYamlAliasBytes) + " of text: with alias " + name +
               " the aliases repeat more text than that; a profile's aliases repeat a few values",
           mark);
    attach(target.node, target.size);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, YamlKind::sequence);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, anchor, YamlKind::mapping);
  }
  void OnMapEnd() override { close(); }

  void OnAnchor(const YAML::Mark& mark, const std::string& name) override {
    touch(mark);
    const auto [first, inserted] = anchor_names_.try_emplace(name, at(mark));
    if (!inserted)
      problem("yaml-duplicate-anchor",
              "anchor " + quoted_excerpt("&" + name) + " is defined twice (first at line " +
                  std::to_string(first->second.line) + ", column " + std::to_string(first->second.column) + "); " +
                  std::string(kPyYaml) + " refuses a repeated anchor: rename one",
              at(mark));
    pending_anchor_name_ = name;
  }

 private:
  struct Anchor {
    const YamlNode* node = nullptr;
    std::string name;
    bool open = false;  // a list or mapping still being read: an alias to it would be a cycle
    Expanded size;
  };
  struct Frame {
    YamlNode* node = nullptr;
    YAML::anchor_t anchor = YAML::NullAnchor;
    Expanded size;
    const YamlNode* key = nullptr;  // a mapping's key that waits for its value
    std::unordered_map<std::string, std::size_t> pairs;  // a mapping's keys (key_identity) -> pair index
  };

  SourceLocation at(const YAML::Mark& mark) const {
    if (mark.line < 0) return SourceLocation{file_, 0, 0};
    return SourceLocation{file_, mark.line + 1, mark.column + 1};
  }
  SourceLocation at(const YamlNode& node) const { return SourceLocation{file_, node.line, node.column}; }

  void touch(const YAML::Mark& mark) {
    if (mark.pos > 0) reported_offset_ = std::max(reported_offset_, static_cast<std::size_t>(mark.pos));
  }

  void problem(std::string code, std::string message, SourceLocation location) {
    if (++problems_ <= kMaxProfileProblems) diagnostics_.error(std::move(code), std::move(message), std::move(location));
  }
  // A broken limit: reported, then nothing more is read.
  [[noreturn]] void stop(std::string code, std::string message, const YAML::Mark& mark) {
    diagnostics_.error(std::move(code), std::move(message), at(mark));
    throw StopReading{};
  }

  YamlNode& make(const YAML::Mark& mark, YamlKind kind) {
    if (nodes_.size() >= kMaxYamlNodes)
      stop("yaml-too-many-nodes",
           "the profile holds more than " + millions(kMaxYamlNodes) +
               " YAML nodes (keys, values, lists and mappings); a profile needs a few thousand",
           mark);
    YamlNode& node = nodes_.emplace_back();
    node.kind = kind;
    node.line = mark.line + 1;
    node.column = mark.column + 1;
    return node;
  }

  void register_anchor(YAML::anchor_t anchor, const YamlNode& node, bool open, Expanded size) {
    if (anchor == YAML::NullAnchor) return;
    if (anchor >= anchors_.size()) anchors_.resize(anchor + 1);
    anchors_[anchor] = Anchor{&node, std::move(pending_anchor_name_), open, size};
    pending_anchor_name_.clear();
  }

  void leaf(YamlNode& node, YAML::anchor_t anchor) {
    const Expanded size{1, node.text.size()};
    register_anchor(anchor, node, false, size);
    attach(&node, size);
  }

  void open(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor, YamlKind kind) {
    touch(mark);
    if (stack_.size() >= kMaxYamlDepth)
      stop("yaml-too-deep",
           "YAML nesting deeper than " + std::to_string(kMaxYamlDepth) +
               " (lists and mappings inside each other); a profile needs a handful of levels",
           mark);
    check_collection_tag(tag, kind, mark);
    YamlNode& node = make(mark, kind);
    register_anchor(anchor, node, true, Expanded{});
    Frame& frame = stack_.emplace_back();
    frame.node = &node;
    frame.anchor = anchor;
  }

  void close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    if (frame.anchor != YAML::NullAnchor && frame.anchor < anchors_.size()) {
      anchors_[frame.anchor].open = false;
      anchors_[frame.anchor].size = frame.size;
    }
    attach(frame.node, frame.size);
  }

  void attach(const YamlNode* child, const Expanded& size) {
    if (stack_.empty()) {
      if (!root_) root_ = child;
      return;
    }
    Frame& parent = stack_.back();
    parent.size += size;
    if (parent.node->is_sequence()) {
      parent.node->children.push_back(child);
    } else if (!parent.key) {
      parent.key = child;
    } else {
      const YamlNode* key = std::exchange(parent.key, nullptr);
      add_pair(parent, *key, child);
    }
  }

  void add_pair(Frame& frame, const YamlNode& key, const YamlNode* value) {
    if (key.is_map() || key.is_sequence()) {
      problem("yaml-complex-key",
              "a mapping key must be a single value, not " + describe(key) + " (" + std::string(kPyYaml) +
                  " refuses it)",
              at(key));
      return;
    }
    if (key.kind == YamlKind::string && !key.quoted && key.text == "<<") {
      problem("yaml-merge-key", "YAML merge keys ('<<') are not supported in profiles; write the keys out", at(key));
      return;
    }
    std::vector<const YamlNode*>& children = frame.node->children;
    const auto [found, inserted] = frame.pairs.try_emplace(key_identity(key), children.size() / 2);
    if (inserted) {
      children.push_back(&key);
      children.push_back(value);
      return;
    }
    const YamlNode& first = *children[2 * found->second];
    problem("yaml-duplicate-key",
            "duplicate key " + describe(key) + " (first at line " + std::to_string(first.line) + ", column " +
                std::to_string(first.column) + "): " + std::string(kPyYaml) + " would keep this later value, " +
                describe(*value) + "; remove one of the two",
            at(key));
    children[2 * found->second + 1] = value;  // a Python dict keeps the first place and the last value
  }

  YamlKind scalar_kind(const std::string& tag, YamlNode& node, const YAML::Mark& mark) {
    if (tag == "?") return implicit_kind(node.text);  // plain and untagged
    if (tag == "!") return YamlKind::string;          // quoted, a block scalar, or the non-specific tag '!'
    if (starts_with(tag, kCoreTagPrefix)) {
      const std::string_view name = std::string_view(tag).substr(kCoreTagPrefix.size());
      const std::string value = quoted_excerpt(node.text);
      if (name == "str") return YamlKind::string;
      if (name == "null") {
        node.text.clear();
        return YamlKind::null;
      }
      if (name == "int") {
        if (parse_yaml_integer(node.text)) return YamlKind::integer;
        problem("yaml-bad-tagged-value", value + " is tagged !!int but is not a YAML integer", at(mark));
        return YamlKind::string;
      }
      if (name == "float") {
        if (is_yaml_float(node.text) || parse_yaml_integer(node.text) || yaml_float_value(node.text))
          return YamlKind::floating;
        problem("yaml-bad-tagged-value", value + " is tagged !!float but is not a YAML number", at(mark));
        return YamlKind::string;
      }
      if (name == "bool") {
        node.kind = YamlKind::boolean;
        if (yaml_boolean(node)) return YamlKind::boolean;
        problem("yaml-bad-tagged-value", value + " is tagged !!bool but is not true/false, yes/no or on/off",
                at(mark));
        return YamlKind::string;
      }
      if (name == "map" || name == "seq") {
        problem("yaml-tag-mismatch", value + " is tagged " + tag_as_written(tag) + " but is a single value", at(mark));
        return implicit_kind(node.text);
      }
    }
    unknown_tag(tag, "on " + quoted_excerpt(node.text), mark);
    return implicit_kind(node.text);
  }

  void check_collection_tag(const std::string& tag, YamlKind kind, const YAML::Mark& mark) {
    if (tag == "?" || tag == "!") return;
    const std::string what = kind == YamlKind::mapping ? "a mapping" : "a list";
    if (tag == std::string(kCoreTagPrefix) + "map" || tag == std::string(kCoreTagPrefix) + "seq") {
      if ((kind == YamlKind::mapping) != (tag.back() == 'p'))
        problem("yaml-tag-mismatch", quoted_excerpt(tag_as_written(tag)) + " tags " + what, at(mark));
      return;
    }
    static constexpr std::string_view kScalarTags[] = {"str", "int", "float", "bool", "null"};
    for (const std::string_view scalar : kScalarTags)
      if (tag == std::string(kCoreTagPrefix) + std::string(scalar)) {
        problem("yaml-tag-mismatch", quoted_excerpt(tag_as_written(tag)) + " tags " + what + ", not a single value",
                at(mark));
        return;
      }
    unknown_tag(tag, "on " + what, mark);
  }

  void unknown_tag(const std::string& tag, const std::string& on, const YAML::Mark& mark) {
    problem("yaml-unknown-tag",
            "unknown YAML tag " + quoted_excerpt(tag_as_written(tag)) + " " + on +
                "; a profile holds plain values (of the standard tags, !!str, !!int, !!float, !!bool, !!null, !!seq "
                "and !!map are accepted)",
            at(mark));
  }

  std::string_view text_;
  const std::string& file_;
  Diagnostics& diagnostics_;
  std::deque<YamlNode>& nodes_;
  std::size_t bom_bytes_ = 0;
  std::size_t reported_offset_ = 0;
  std::size_t problems_ = 0;
  int documents_ = 0;
  const YamlNode* root_ = nullptr;
  std::vector<Frame> stack_;
  std::vector<Anchor> anchors_;  // by yaml-cpp's anchor id, which counts up from 1
  std::unordered_map<std::string, SourceLocation> anchor_names_;
  std::string pending_anchor_name_;  // OnAnchor comes just before its node's event
  Expanded alias_total_{0, 0};
};

// Hands the text to yaml-cpp a piece at a time and ends it early once the scanner has read
// kMaxYamlLookaheadBytes past the last event it reported; the reader then reports that limit.
class LookaheadBuffer final : public std::streambuf {
 public:
  LookaheadBuffer(std::string_view text, const TreeBuilder& builder) : text_(text), builder_(builder) {}
  bool stopped() const { return stopped_; }
  std::size_t stopped_at() const { return served_; }  // text offset

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (stopped_ || served_ >= text_.size()) return traits_type::eof();
    if (served_ > builder_.text_offset(builder_.reported_offset()) + kMaxYamlLookaheadBytes) {
      stopped_ = true;
      return traits_type::eof();
    }
    const std::size_t piece = std::min<std::size_t>(kPieceBytes, text_.size() - served_);
    // The get area is only read; eback() at the text's start lets yaml-cpp put back what it read.
    char* const start = const_cast<char*>(text_.data());
    setg(start, start + served_, start + served_ + piece);
    served_ += piece;
    return traits_type::to_int_type(*gptr());
  }

 private:
  static constexpr std::size_t kPieceBytes = 4096;
  std::string_view text_;
  const TreeBuilder& builder_;
  std::size_t served_ = 0;
  bool stopped_ = false;
};

// The reason the scanner read too far ahead: deep '[' / '{' nesting when the unreported part nests
// past kMaxYamlDepth (the usual cause), otherwise one value too large to read whole.
void report_lookahead(std::string_view text, std::size_t from, std::size_t to, const SourceLocation& reported,
                      const std::string& file, Diagnostics& diagnostics) {
  std::size_t depth = 0;
  for (std::size_t i = from; i < std::min(to, text.size()); ++i) {
    if (text[i] == '[' || text[i] == '{') ++depth;
    else if ((text[i] == ']' || text[i] == '}') && depth > 0) --depth;
    if (depth > kMaxYamlDepth) {
      diagnostics.error("yaml-too-deep",
                        "YAML nesting deeper than " + std::to_string(kMaxYamlDepth) +
                            " (lists and mappings inside each other); a profile needs a handful of levels",
                        location_of(text, i, file));
      return;
    }
  }
  diagnostics.error("yaml-value-too-large",
                    "a YAML value larger than " + mebibytes(kMaxYamlLookaheadBytes) + " follows line " +
                        std::to_string(reported.line) + ", column " + std::to_string(reported.column) +
                        ": a scalar, or a '[...]' or '{...}' collection where a key could start (yaml-cpp reads "
                        "those whole before parsing them); shorten it, or write the collection in block style",
                    reported);
}

}  // namespace

std::optional<std::size_t> YamlNode::find(std::string_view name) const {
  if (!is_map()) return std::nullopt;
  for (std::size_t pair = 0; pair < size(); ++pair)
    if (key(pair).is_scalar() && key(pair).text == name) return pair;
  return std::nullopt;
}

std::optional<YamlInteger> yaml_integer(const YamlNode& node) {
  if (node.kind != YamlKind::integer) return std::nullopt;
  return parse_yaml_integer(node.text);
}

std::optional<bool> yaml_boolean(const YamlNode& node) {
  if (node.kind != YamlKind::boolean) return std::nullopt;
  return parse_yaml_bool(node.text, /*any_case=*/true);
}

YamlDocument::YamlDocument(std::string_view text, const std::string& file, Diagnostics& diagnostics) {
  if (!check_characters(text, file, diagnostics)) return;
  TreeBuilder builder(text, file, diagnostics, nodes_);
  LookaheadBuffer buffer(text, builder);
  std::istream input(&buffer);
  std::optional<Diagnostic> syntax;  // yaml-cpp's complaint, unless the lookahead limit caused it
  bool complete = false;
  bool limit_reported = false;  // by the builder, which then stopped
  try {
    YAML::Parser parser(input);
    if (parser.HandleNextDocument(builder)) {
      try {
        parser.HandleNextDocument(builder);  // a second document ends at its start
      } catch (const SecondDocument&) {
      }
    }
    complete = true;
  } catch (const StopReading&) {
    limit_reported = true;
  } catch (const YAML::DeepRecursion& e) {
    syntax = Diagnostic{Severity::error, "yaml-too-deep",
                        "YAML nesting deeper than " + std::to_string(kMaxYamlDepth) +
                            " (lists and mappings inside each other); a profile needs a handful of levels",
                        SourceLocation{file, e.mark.line + 1, e.mark.column + 1}, std::nullopt, ""};
  } catch (const YAML::ParserException& e) {
    const bool located = e.mark.line >= 0;
    syntax = Diagnostic{Severity::error, "yaml-syntax", "YAML syntax error: " + yaml_cpp_message(e.msg),
                        SourceLocation{file, located ? e.mark.line + 1 : 0, located ? e.mark.column + 1 : 0},
                        std::nullopt, ""};
  } catch (const YAML::Exception& e) {
    syntax = Diagnostic{Severity::error, "yaml-syntax", "cannot read YAML: " + yaml_cpp_message(e.msg),
                        SourceLocation{file, 0, 0}, std::nullopt, ""};
  }
  builder.report_unlisted();
  if (limit_reported) return;
  if (buffer.stopped()) {
    report_lookahead(text, builder.text_offset(builder.reported_offset()), buffer.stopped_at(),
                     builder.location_of_reported(), file, diagnostics);
    return;
  }
  if (syntax) {
    diagnostics.add(syntax->severity, syntax->code, syntax->message, syntax->location);
    return;
  }
  if (!complete) return;
  readable_ = true;
  root_ = builder.root();
}

}  // namespace switchyard
