#pragma once
// Chat templates: the Jinja subset that real models' templates use (tokenizer_config.json's
// `chat_template`, a GGUF's `tokenizer.chat_template`), rendered as transformers'
// apply_chat_template renders them: Jinja with trim_blocks and lstrip_blocks, default undefined
// values, `raise_exception`, and its `tojson`.
//
// Supported: text, {{ expressions }}, {# comments #}, whitespace control (-), {% if / elif / else %},
// {% for x in xs %} (with loop.index0, index, first, last, length, revindex; else; break and
// continue), {% set name = ... %} and {% set ns.attr = ... %} with namespace(), {% generation %}.
// Expressions: literals (strings, numbers, true/false/none, lists, dicts), names, attributes and
// subscripts (negative indexes and slices), and/or/not, comparisons, in / not in, + - * / // % ~,
// `x if c else y`, tests (defined, undefined, none, string, number, boolean, true, false, mapping,
// sequence, iterable, even, odd), filters (length, count, tojson, trim, lower, upper, string,
// default, first, last, join, list, items), string methods (startswith, endswith, split, strip,
// lstrip, rstrip, lower, upper, replace, title), dict methods (items, keys, values, get).
// Anything else is an InputError naming the construct and its line, at parse time where the
// construct is a statement, at render time for an unknown filter, test or method.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace switchyard::text {

struct TemplateProgram;

class ChatTemplate {
 public:
  // `name` names the template in errors ("tokenizer_config.json's chat_template").
  static ChatTemplate parse(std::string_view source, const std::string& name);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // The template rendered with `context`'s keys as its variables (messages, tools,
  // add_generation_prompt, bos_token, eos_token, enable_thinking, ...). Throws InputError naming
  // the template, the line and what failed (raise_exception's message included).
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  ChatTemplate();
  std::unique_ptr<TemplateProgram> program_;
};

}  // namespace switchyard::text
