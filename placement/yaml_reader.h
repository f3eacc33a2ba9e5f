#pragma once
// The YAML of a profile, read from untrusted text into plain values. Any bytes give either a tree
// or located diagnostics, in time and memory linear in the text and within the limits below; no
// input can overflow the stack, loop, or make yaml-cpp hold more than a bounded lookahead.
// Values mean what PyYAML (which ktransformers uses) makes of them, so that an existing
// ktransformers profile means the same here: YAML 1.1 plain scalars (yes/no/on/off booleans, 010
// octal, 0x1f hex, 0b11 binary, 1:30 sexagesimal), the standard tags (!!str, !!int, ...), one
// document per file. Where PyYAML would quietly pick one reading (a repeated key keeps its last
// value), the reader takes the same one and reports it; where PyYAML refuses (a repeated anchor, a
// second document, a character YAML forbids), the reader refuses too.
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.h"
#include "placement/yaml_scalars.h"

namespace switchyard {

// Limits on one profile's YAML: far above any real profile (the shipped ones nest 6 deep and hold
// a few thousand nodes), low enough that no text exhausts the stack, the memory or the time.
constexpr std::size_t kMaxYamlDepth = 256;                // lists and mappings inside each other
constexpr std::size_t kMaxYamlNodes = 4'000'000;          // keys, values, lists and mappings as written
constexpr std::size_t kMaxYamlAliasNodes = 1'000'000;     // nodes that aliases (*name) repeat, expanded
constexpr std::size_t kMaxYamlAliasBytes = 16ULL << 20;   // scalar text that aliases repeat, expanded
// yaml-cpp reads a whole scalar, and a whole flow collection ('[...]', '{...}') that starts where a
// mapping key could, before it reports any of it, holding ~100 bytes per token meanwhile; reading
// stops this far past the last value it reported.
constexpr std::size_t kMaxYamlLookaheadBytes = 1ULL << 20;
// Problems reported one by one per stage (YAML, rules); past this the rest are counted, not listed.
constexpr std::size_t kMaxProfileProblems = 1000;

// What a node is, resolved as PyYAML resolves it.
enum class YamlKind { null, boolean, integer, floating, string, sequence, mapping };

struct YamlNode {
  YamlKind kind = YamlKind::null;
  bool quoted = false;  // a scalar written between quotes ('...' or "...")
  int line = 0;         // 1-based start of the node (of its tag or anchor when it has one)
  int column = 0;       // 1-based, in bytes
  std::string text;     // a scalar as written, escapes resolved ("010", "yes"); "" for null and collections
  // sequence: its items; mapping: key, value, key, value, ... with unique keys (a repeated key keeps
  // its first place and its last value, as a Python dict does). An alias is its anchor's node
  // itself, so a node may have several parents, but it is never its own ancestor.
  std::vector<const YamlNode*> children;

  bool is_map() const { return kind == YamlKind::mapping; }
  bool is_sequence() const { return kind == YamlKind::sequence; }
  bool is_null() const { return kind == YamlKind::null; }
  // A boolean, integer, floating or string value: one written word or quoted text.
  bool is_scalar() const { return !is_map() && !is_sequence() && !is_null(); }
  std::size_t size() const { return is_map() ? children.size() / 2 : children.size(); }
  // A mapping's pairs.
  const YamlNode& key(std::size_t pair) const { return *children[2 * pair]; }
  const YamlNode& value(std::size_t pair) const { return *children[2 * pair + 1]; }
  // The pair whose key is the scalar `name`; nullopt when none. Linear in the pairs: meant for the
  // few fixed keys of a rule, not for mappings of user-chosen size.
  std::optional<std::size_t> find(std::string_view name) const;
};

// An integer node's value; nullopt for any other node (a quoted "10" is a string).
std::optional<YamlInteger> yaml_integer(const YamlNode& node);
// A boolean node's value; nullopt for any other node.
std::optional<bool> yaml_boolean(const YamlNode& node);

// One YAML document read from text, or nothing and the reason in diagnostics.
class YamlDocument {
 public:
  // Reads `text`; problems go to `diagnostics`, located in `file`.
  YamlDocument(std::string_view text, const std::string& file, Diagnostics& diagnostics);
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;

  // False when the text is not YAML or breaks a limit: nothing of it can be trusted.
  bool readable() const { return readable_; }
  // The document's top node; nullptr when unreadable or when the text holds no document (empty, only
  // comments). An empty document ("---") is a null node.
  const YamlNode* root() const { return root_; }

 private:
  std::deque<YamlNode> nodes_;  // a deque: children point at nodes while more are added
  const YamlNode* root_ = nullptr;
  bool readable_ = false;
};

}  // namespace switchyard
