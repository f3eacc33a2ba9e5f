// Chat templates (text/chat_template.h): DeepSeek-V3's and Qwen3's real templates (from their
// tokenizer_config.json, npm) render the fixture conversations character for character as
// transformers 5.17's apply_chat_template did on the GPU machine (scripts/chat-template-fixtures.py
// wrote tests/fixtures/chat_templates); where transformers failed, so must we. Then the Jinja
// subset on small templates made here: whitespace control, trim_blocks and lstrip_blocks, scoping,
// loops, filters, tests, and errors that name the construct and its line.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace tx = switchyard::text;
using Json = nlohmann::ordered_json;
using switchyard::testing::source_path;

namespace {

Json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), "cannot read " << file.string());
  return Json::parse(in);
}

std::string render(const std::string& source, const Json& context = Json::object()) {
  return tx::ChatTemplate::parse(source, "t").render(context);
}

}  // namespace

TEST_CASE("chat template: DeepSeek-V3's and Qwen3's templates render as transformers' apply_chat_template") {
  for (const std::string package : {"deepseek_v3", "qwen3"}) {
    INFO(package);
    const std::filesystem::path config_file = source_path(".tokenizers/" + package + "/tokenizer_config.json");
    if (!std::filesystem::exists(config_file))
      FAIL("the real tokenizer " << package << " is not installed: run scripts/fetch-tokenizers.sh (scripts/install-deps.sh runs it)");
    const Json config = read_json(config_file);
    const Json fixture = read_json(source_path("tests/fixtures/chat_templates/" + package + ".json"));
    const tx::ChatTemplate t = tx::ChatTemplate::parse(config["chat_template"].get<std::string>(), "chat_template");
    int rendered = 0, refused = 0;
    for (const Json& c : fixture["cases"]) {
      INFO(c["name"].get<std::string>());
      Json context = c["kwargs"];
      context["messages"] = c["messages"];
      if (!c["tools"].is_null()) context["tools"] = c["tools"];
      context["add_generation_prompt"] = c["add_generation_prompt"];
      if (!fixture["bos_token"].is_null()) context["bos_token"] = fixture["bos_token"];
      if (!fixture["eos_token"].is_null()) context["eos_token"] = fixture["eos_token"];
      if (c.contains("text")) {
        CHECK(t.render(context) == c["text"].get<std::string>());
        ++rendered;
      } else {
        CHECK_THROWS_AS(t.render(context), switchyard::InputError);
        ++refused;
      }
    }
    CHECK(rendered >= 8);
    MESSAGE(package << ": " << rendered << " conversations rendered as transformers did, " << refused
                    << " refused where transformers failed");
  }
}

TEST_CASE("chat template: whitespace control, trim_blocks and lstrip_blocks as Jinja in transformers") {
  CHECK(render("a  {{- 'b' -}}  c") == "abc");
  CHECK(render("{% if true %}\nyes\n{% endif %}\nafter") == "yes\nafter");  // trim_blocks
  CHECK(render("line\n    {% if true %}x{% endif %}\n") == "line\nx");        // lstrip_blocks, then trim_blocks
  CHECK(render("  {{ 'kept' }}  ") == "  kept  ");                            // output tags are not stripped
  CHECK(render("a\n  {%+ if true %}b{% endif %}") == "a\n  b");               // {%+ keeps the spaces
  CHECK(render("x {# a comment #}\ny") == "x y");
  CHECK(render("{{ '}}' }}{{ \"{%\" }}") == "}}{%");
}

TEST_CASE("chat template: expressions, loops, scopes and namespaces") {
  const Json messages = Json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  CHECK(render("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{{ m['content'] }}{% if not loop.last %},{% endif %}{% endfor %}",
               {{"messages", messages}}) == "1ua,2ab");
  CHECK(render("{% for m in messages[::-1] %}{{ m.content }}{% endfor %}", {{"messages", messages}}) == "ba");
  CHECK(render("{{ messages|length - 1 }}", {{"messages", messages}}) == "1");
  // A set inside a loop stays in the loop; a namespace carries state out of it.
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "6");
  CHECK(render("{{ 'a</think>b'.split('</think>')[-1] }}|{{ '\\n x \\n'.strip('\\n') }}|{{ ' y'.lstrip() }}") == "b| x |y");
  CHECK(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ y is not defined }}") == "False True True True");
  CHECK(render("{{ {'b': 1, 'a': [true, none, 'é']} | tojson }}") == R"({"b": 1, "a": [true, null, "é"]})");
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 'a' ~ 1 }} {{ 2 if false else 3 }}") == "3 -4 1 0.5 a1 3");
  CHECK(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}") == "02");
  CHECK(render("{% for i in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% if false %}a{% elif 'in' in 'inside' %}b{% else %}c{% endif %}") == "b");
}

TEST_CASE("chat template: what it does not support, and failures, are errors naming the line") {
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse("ok\n{% macro m() %}{% endmacro %}", "t"),
                       doctest::Contains("t, line 2: the statement 'macro' is not supported"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse("{% if x %}never closed", "t"), doctest::Contains("ends before 'endif'"),
                       switchyard::InputError);
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse("{{ x", "t"), doctest::Contains("is not closed"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse("{% endfor %}", "t"), doctest::Contains("'endfor' without its opening"),
                       switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("\n\n{{ x | wordwrap }}"), doctest::Contains("line 3: the filter 'wordwrap' is not supported"),
                       switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("{{ raise_exception('Only user and assistant roles') }}"),
                       doctest::Contains("raised an exception: Only user and assistant roles"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("{{ 'a' in none }}"), doctest::Contains("not a container"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("{{ x.y }}"), doctest::Contains("undefined"), switchyard::InputError);
}

TEST_CASE("chat template: hostile templates are bounded: nesting, loops and output") {
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "t"),
                       doctest::Contains("nested deeper"), switchyard::InputError);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  CHECK_THROWS_WITH_AS(tx::ChatTemplate::parse(ifs, "t"), doctest::Contains("nested deeper"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
                       doctest::Contains("loops ran more than"), switchyard::InputError);
  CHECK_THROWS_WITH_AS(render("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(30) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}"),
                       doctest::Contains("MiB"), switchyard::InputError);
}

TEST_CASE("chat template: tokenize --messages renders the model's template and encodes the text") {
  for (const std::string package : {"deepseek_v3", "qwen3"}) {
    INFO(package);
    const Json fixture = read_json(source_path("tests/fixtures/chat_templates/" + package + ".json"));
    const Json& c = fixture["cases"][1];  // system and turns, with the generation prompt
    REQUIRE(c["add_generation_prompt"].get<bool>());
    switchyard::core_testing::TempDir dir;
    const std::filesystem::path messages = dir / "messages.json";
    std::ofstream(messages) << Json{{"model", "m"}, {"messages", c["messages"]}}.dump();  // a request body
    const auto r = switchyard::testing::run_switchyard("tokenize --tokenizer " + source_path(".tokenizers/" + package) +
                                                       " --messages " + messages.string() + " --format json");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const Json out = Json::parse(r.output);
    CHECK(out["text"] == c["text"]);
    const tx::Tokenizer t = tx::Tokenizer::from_file(source_path(".tokenizers/" + package));
    CHECK(out["ids"].get<std::vector<std::int32_t>>() == t.encode(c["text"].get<std::string>(), false));
  }
  // Messages that are not a conversation.
  switchyard::core_testing::TempDir dir;
  std::ofstream(dir / "bad.json") << R"([{"content": "no role"}])";
  const auto bad = switchyard::testing::run_switchyard_with_env("", "tokenize --tokenizer " + source_path(".tokenizers/qwen3") +
                                                                    " --messages " + (dir / "bad.json").string(), true);
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("messages[0]: not an object with a string \"role\"") != std::string::npos);
}
