// Hostile text through the real binary: bytes that are not strict UTF-8 in a prompt, a typed chat
// line and a chat template (PCRE2 must never see them); tokenizer.json pre-tokenizers that are
// empty or backtrack without end; a long --ids list; and llama.cpp's -ts with more shares than a
// plan has GPUs.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"
#include "tests/tokenizer_test_support.h"
#include "text/byte_level.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace sy = switchyard;
namespace fs = std::filesystem;
using sy::core_testing::contains;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::write_file;
using sy::testing::CommandResult;
using sy::testing::real_tokenizer;
using sy::testing::run_switchyard_with_env;

namespace {

CommandResult run_both(const std::string& arguments) { return run_switchyard_with_env("", arguments, true); }

// The strings of bytes that are not UTF-8 and once passed as text: a code point past U+10FFFF, an
// encoded surrogate, an overlong NUL, and a byte that is never UTF-8.
const std::vector<std::string> kNotUtf8 = {"\xF7\x89\xBD\xA1", "\xED\xA0\x80", "\xC0\x80", "\xFF\xFE"};

// A byte-level tokenizer.json whose pre-tokenizer is this Split, then ByteLevel.
std::string tokenizer_with_split(const nlohmann::json& pattern) {
  return sy::testing::small_tokenizer(
      {}, {},
      {{"type", "Sequence"},
       {"pretokenizers",
        {{{"type", "Split"}, {"pattern", pattern}, {"behavior", "Isolated"}, {"invert", false}},
         {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}});
}

}  // namespace

TEST_CASE("hostile text: bytes that are not UTF-8 in a prompt are a usage error, never a crash") {
  const std::string deepseek = real_tokenizer("deepseek_v3").string();
  for (const std::string& bad : kNotUtf8) {
    INFO(sy::quoted_excerpt(bad));
    const CommandResult tokenized = run_both("tokenize --tokenizer " + deepseek + " --prompt 'say " + bad + " now'");
    INFO(tokenized.output);
    CHECK(tokenized.exit_code == 2);
    CHECK(contains(tokenized.output, "not valid UTF-8 (at byte 4)"));
    const CommandResult ran = run_both("run --max_new_tokens 2 --prompt 'say " + bad + " now'");
    INFO(ran.output);
    CHECK(ran.exit_code == 2);
    CHECK(contains(ran.output, "not valid UTF-8 (at byte 4)"));
  }
}

TEST_CASE("hostile text: chat reports a line that is not UTF-8 and goes on with the next") {
  // The built-in model, its real tokenizer and chat template; two answers of 3 tokens.
  const std::string command = "printf 'caf\\351\\n\\377\\376\\n\\367\\211\\275\\241\\nhello\\n' | " +
                              std::string(SWITCHYARD_BINARY) + " chat --max_new_tokens 3 2>&1";
  CommandResult chat;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) chat.output.append(buffer, n);
  const int status = pclose(pipe);
  chat.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  INFO(chat.output);
  CHECK(chat.exit_code == 0);
  std::size_t reported = 0;
  for (std::size_t at = 0; (at = chat.output.find("is not UTF-8 at byte", at)) != std::string::npos; ++at) ++reported;
  CHECK(reported == 3);
  CHECK(contains(chat.output, "caf\\xE9"));  // the line, quoted printably
  // "hello" was answered: one stats line, after the three reports.
  std::size_t answers = 0;
  for (std::size_t at = 0; (at = chat.output.find(" answer tokens at ", at)) != std::string::npos; ++at) ++answers;
  CHECK(answers == 1);
}

TEST_CASE("hostile text: a chat template that is not UTF-8 is the model's error, named with its line") {
  for (const std::string& bad : kNotUtf8) {
    INFO(sy::quoted_excerpt(bad));
    const std::string source = "{% for m in messages %}\n{{ m.content }}" + bad + "{% endfor %}";
    try {
      sy::text::ChatTemplate::parse(source, "t.gguf's tokenizer.chat_template");
      FAIL("parsed");
    } catch (const sy::InputError& e) {
      CHECK(e.exit_code() == sy::kExitBadContent);
      CHECK(contains(e.what(), "t.gguf's tokenizer.chat_template, line 2: the template is not valid UTF-8 (at byte 39)"));
    }
  }
}

TEST_CASE("hostile text: a GGUF whose chat template is not UTF-8 is refused at load, by name, not at the first chat") {
  const TempDir dir;
  const std::string deepseek = real_tokenizer("deepseek_v3").string();
  REQUIRE(run_both("make-model --preset tiny-deepseek-v3 --format gguf --tokenizer " + deepseek + " --out " +
                   (dir / "model").string()).exit_code == 0);
  // Only the GGUF's own tokenizer, not the copies make-model puts beside it.
  for (const auto& entry : fs::directory_iterator(dir / "model"))
    if (entry.path().filename() != "model.gguf") fs::remove(entry.path());
  // "User" inside the template's '<｜User｜>' becomes a code point past U+10FFFF, length kept.
  std::string bytes = sy::core_testing::read_file(dir / "model" / "model.gguf");
  const std::size_t at = bytes.find("\xEF\xBD\x9CUser\xEF\xBD\x9C>'");
  REQUIRE(at != std::string::npos);
  bytes.replace(at + 3, 4, "\xF7\x89\xBD\xA1");
  write_file(dir / "model" / "model.gguf", bytes);
  write_file(dir / "messages.json", R"([{"role": "user", "content": "hi"}])");
  for (const std::string& command :
       {"tokenize --tokenizer " + (dir / "model" / "model.gguf").string() + " --messages " + (dir / "messages.json").string(),
        "chat --gguf_path " + (dir / "model" / "model.gguf").string() + " --max_new_tokens 2 < /dev/null"}) {
    const CommandResult r = run_both(command);
    INFO(command << "\n" << r.output);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.output, "tokenizer.chat_template"));
    CHECK(contains(r.output, "the template is not valid UTF-8 (at byte"));
  }
}

TEST_CASE("hostile text: a Split pre-tokenizer that is empty, or backtracks without end, is the file's error") {
  const TempDir dir;
  write_file(dir / "empty.json", tokenizer_with_split({{"Regex", ""}}));
  const CommandResult empty = run_both("tokenize --tokenizer " + (dir / "empty.json").string() + " --prompt hello");
  INFO(empty.output);
  CHECK(empty.exit_code == 1);
  CHECK(contains(empty.output, "Split's pattern is empty"));
  CHECK_FALSE(contains(empty.output, "internal error"));
  write_file(dir / "neither.json", tokenizer_with_split({{"Regex", 5}}));
  const CommandResult neither = run_both("tokenize --tokenizer " + (dir / "neither.json").string() + " --prompt hello");
  CHECK(neither.exit_code == 1);
  CHECK(contains(neither.output, "Split needs a pattern"));
  // Nested quantifiers over a long text backtrack without end: the match limit stops them. A
  // repeated group that only runs long ("(?:a|b)+" over 30,000 letters, past the JIT's stack) is
  // no runaway, and is matched.
  write_file(dir / "prompt.txt", std::string(30000, 'a') + "b");
  for (const std::string regex : {"(?:a|b)+", "(\\w|\\s)*$"}) {
    write_file(dir / "long.json", tokenizer_with_split({{"Regex", regex}}));
    const CommandResult r = run_both("tokenize --tokenizer " + (dir / "long.json").string() + " --format json --prompt \"$(cat " +
                                     (dir / "prompt.txt").string() + ")\"");
    INFO(regex << ": " << r.output.substr(0, 400));
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.output)["ids"].size() == 30001);
  }
  for (const std::string regex : {"(a+)+$", "((?:a|a?)+)+$"}) {
    write_file(dir / "runaway.json", tokenizer_with_split({{"Regex", regex}}));
    const auto start = std::chrono::steady_clock::now();
    const CommandResult r = run_both("tokenize --tokenizer " + (dir / "runaway.json").string() + " --prompt \"$(cat " +
                                     (dir / "prompt.txt").string() + ")\"");
    INFO(regex << ": " << r.output.substr(0, 400));
    CHECK(r.exit_code == 1);
    CHECK(contains(r.output, "backtracking limit"));
    CHECK_FALSE(contains(r.output, "PCRE2 error"));
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 30.0 * sy::testing::kBuildSlowdown);
  }
}

TEST_CASE("hostile text: tokenize --ids takes 30,000 ids in one pass, and each token end is its prefix's text") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const fs::path deepseek = real_tokenizer("deepseek_v3");
  const sy::text::Tokenizer t = sy::text::Tokenizer::from_file(deepseek / "tokenizer.json");
  // Ids below 1000, so that the list stays within one argument's 128 KiB.
  std::vector<std::int32_t> ids(30'000);
  for (std::int32_t& id : ids) id = static_cast<std::int32_t>(rng.below(1000));
  std::string list;
  for (std::int32_t id : ids) list += std::to_string(id) + ",";
  const TempDir dir;
  write_file(dir / "ids.txt", list);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = sy::testing::run_switchyard("tokenize --tokenizer " + deepseek.string() + " --format json --ids \"$(cat " +
                                                      (dir / "ids.txt").string() + ")\"");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r.exit_code == 0);
  CHECK(seconds < 6.0 * sy::testing::kBuildSlowdown);  // a decode per prefix took 14 s
  const nlohmann::json got = nlohmann::json::parse(r.output);
  const std::vector<std::size_t> ends = got["token_ends"];
  REQUIRE(ends.size() == ids.size());
  CHECK(ends.back() == t.decode(ids).size());  // the JSON's text has U+FFFD for bytes that are not UTF-8
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t k = 1 + rng.below(ids.size());
    CHECK(ends[k - 1] == t.decode(std::span<const std::int32_t>(ids.data(), k)).size());
  }
}

TEST_CASE("hostile text: the library's token ends agree with decoding each prefix, strip and special tokens included") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  // Llama 2's tokenizer strips one leading space, so the first ids' ends depend on the whole text.
  for (const std::string package : {"llama2", "deepseek_v3"}) {
    const sy::text::Tokenizer t = sy::text::Tokenizer::from_file(real_tokenizer(package) / "tokenizer.json");
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::int32_t> ids(1 + rng.below(12));
      for (std::int32_t& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(t.vocab_size())));
      const std::vector<std::int32_t> space = t.encode(" ", false);
      if (rng.below(2)) ids.insert(ids.begin(), space.begin(), space.end());
      const bool skip_special = rng.below(2) == 1;
      std::vector<std::size_t> ends;
      const std::string text = t.decode(ids, skip_special, &ends);
      REQUIRE(ends.size() == ids.size());
      for (std::size_t k = 1; k <= ids.size(); ++k)
        CHECK(ends[k - 1] == t.decode(std::span<const std::int32_t>(ids.data(), k), skip_special).size());
      CHECK(ends.back() == text.size());
    }
  }
}

TEST_CASE("hostile text: -ts with more shares than a plan may have GPUs is a short usage error") {
  std::string shares = "1";
  for (int i = 0; i < 1500; ++i) shares += ",1";
  for (const std::string& command : {"split --arch tiny-deepseek-v3 -ts " + shares,
                                     "check --arch tiny-deepseek-v3 -ngl 99 -ts " + shares,
                                     std::string("split --arch tiny-deepseek-v3 -ngl 99 --main-gpu 5000")}) {
    const CommandResult r = run_both(command);
    INFO(r.output.substr(0, 600));
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "1024"));
    CHECK_FALSE(contains(r.output, "internal error"));
    CHECK(r.output.size() < 2000);
  }
}
