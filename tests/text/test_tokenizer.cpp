// Tokenizers from tokenizer.json (text/tokenizer.h): DeepSeek-V3's and Qwen3's real files (from
// npm, scripts/fetch-tokenizers.sh) encode the corpus id for id as HF `tokenizers` 0.23 does
// (tests/fixtures/tokenizers, written by scripts/tokenizer-fixtures.py on the GPU machine), and
// decode and stream it back; the BPE's merge order, the byte-level alphabet and bad input on
// small files made here.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"
#include "tests/tokenizer_test_support.h"

namespace tx = switchyard::text;
using switchyard::testing::source_path;

using switchyard::testing::real_tokenizer;
using switchyard::testing::small_tokenizer;
using switchyard::testing::tokenizer_fixture;

namespace {

bool valid_utf8(const std::string& s) {
  for (std::size_t at = 0; at < s.size();)
    if (!tx::next_code_point(s, at)) return false;
  return true;
}


}  // namespace

TEST_CASE("tokenizer: DeepSeek-V3's, Qwen3's, Llama 3's, GPT-4o's and Llama 2's (sentencepiece-style) tokenizer.json encode the corpus as HF tokenizers does") {
  for (const std::string name : {"deepseek_v3", "qwen3", "llama3", "gpt4o", "llama2"}) {
    const std::string& package = name;  // .tokenizers/NAME holds the fixture NAME's tokenizer
    INFO(name);
    const tx::Tokenizer t = tx::Tokenizer::from_file(real_tokenizer(package));
    const nlohmann::json expected = tokenizer_fixture(name);
    REQUIRE(expected["entries"].size() >= 40);
    std::size_t ids = 0;
    for (const auto& entry : expected["entries"]) {
      const std::string text = entry["text"];
      INFO("text: " << nlohmann::json(text).dump());
      const std::vector<std::int32_t> encoded = t.encode(text);
      CHECK(encoded == entry["ids"].get<std::vector<std::int32_t>>());
      CHECK(t.encode(text, false) == entry["ids_plain"].get<std::vector<std::int32_t>>());
      std::vector<std::string> tokens;
      for (std::int32_t id : encoded) tokens.emplace_back(t.token(id));
      CHECK(tokens == entry["tokens"].get<std::vector<std::string>>());
      const std::string decoded = entry["decoded"];
      CHECK(t.decode(encoded) == decoded);
      // Streamed a token at a time: whole characters only, the same text in the end.
      tx::StreamDecoder stream(t, /*skip_special=*/false);
      std::string streamed;
      for (std::int32_t id : encoded) {
        const std::string part = stream.push(id);
        CHECK(valid_utf8(part));
        streamed += part;
      }
      streamed += stream.finish();
      CHECK(streamed == decoded);
      ids += encoded.size();
    }
    CHECK(ids > 500);
  }
}

TEST_CASE("tokenizer: the byte-level alphabet is 256 distinct printable symbols and round-trips") {
  std::set<std::string> symbols;
  for (int b = 0; b < 256; ++b) {
    const std::string s(tx::byte_symbol(static_cast<std::uint8_t>(b)));
    symbols.insert(s);
    std::size_t at = 0;
    const auto c = tx::next_code_point(s, at);
    REQUIRE(c.has_value());
    CHECK(at == s.size());
    CHECK(tx::symbol_byte(*c) == static_cast<std::uint8_t>(b));
  }
  CHECK(symbols.size() == 256);
  CHECK(tx::byte_symbol(' ') == "Ġ");
  CHECK(tx::byte_symbol('\n') == "Ċ");
  CHECK(tx::byte_symbol('A') == "A");
  std::string all, back;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string spelled;
  tx::append_byte_symbols(all, spelled);
  CHECK(tx::append_symbol_bytes(spelled, back));
  CHECK(back == all);
}

TEST_CASE("tokenizer: BPE merges the lowest-ranked pair first, leftmost on ties, and a long word stays fast") {
  // "abb": with (a b) ranked first it becomes [ab, b]; with (b b) first, [a, bb].
  const tx::Tokenizer ab_first = tx::Tokenizer::from_json(small_tokenizer({"ab", "bb"}, {"a b", "b b"}), "ab.json");
  const tx::Tokenizer bb_first = tx::Tokenizer::from_json(small_tokenizer({"ab", "bb"}, {"b b", "a b"}), "bb.json");
  CHECK(ab_first.encode("abb") == std::vector<std::int32_t>{256, 'b'});
  CHECK(bb_first.encode("abb") == std::vector<std::int32_t>{'a', 257});
  // "bbb" with (b b): the leftmost pair merges first.
  CHECK(bb_first.encode("bbb") == std::vector<std::int32_t>{257, 'b'});
  // Chains: a b -> ab, ab ab -> abab.
  const tx::Tokenizer chain = tx::Tokenizer::from_json(small_tokenizer({"ab", "abab"}, {"a b", "ab ab"}), "chain.json");
  CHECK(chain.encode("ababab") == std::vector<std::int32_t>{257, 256});
  CHECK(chain.decode(chain.encode("ababab<eos>")) == "ababab<eos>");
  CHECK(chain.decode(chain.encode("ababab<eos>"), true) == "ababab");
  CHECK(chain.encode("x<eos>y") == std::vector<std::int32_t>{'x', 258, 'y'});

  // 200,000 letters in one piece: a heap of pairs, not a quadratic rescan.
  const std::string word(200000, 'a');
  const tx::Tokenizer aa = tx::Tokenizer::from_json(small_tokenizer({"aa", "aaaa"}, {"a a", "aa aa"}), "aa.json");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> ids = aa.encode(word);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(ids.size() == 50000);
  CHECK(seconds < 5.0 * switchyard::testing::kBuildSlowdown);
}

TEST_CASE("tokenizer: ignore_merges takes a whole-vocabulary piece as one token; an inverted Removed split keeps only the matches") {
  // "abc" is in the vocabulary, but no merge makes it: the merges alone give [ab, c].
  nlohmann::json j = nlohmann::json::parse(small_tokenizer({"ab", "abc"}, {"a b"}));
  CHECK(tx::Tokenizer::from_json(j.dump(), "merges.json").encode("abc") == std::vector<std::int32_t>{256, 'c'});
  j["model"]["ignore_merges"] = true;
  const tx::Tokenizer whole = tx::Tokenizer::from_json(j.dump(), "ignore.json");
  CHECK(whole.encode("abc") == std::vector<std::int32_t>{257});
  CHECK(whole.encode("abcab") == std::vector<std::int32_t>{256, 'c', 256});  // not an entry: merged as before
  CHECK(whole.encode("ab") == std::vector<std::int32_t>{256});

  auto pieces = [](const char* behavior, bool invert) {
    const nlohmann::json spec = {
        {"type", "Sequence"},
        {"pretokenizers", nlohmann::json::array({{{"type", "Split"}, {"pattern", {{"Regex", "[a-z]+"}}}, {"behavior", behavior}, {"invert", invert}},
                                                 {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
    std::vector<std::string> out;
    tx::PreTokenizer(spec, "p.json").split("ab, cd!", [&](std::string_view piece) { out.emplace_back(piece); });
    return out;
  };
  CHECK(pieces("Removed", true) == std::vector<std::string>{"ab", "cd"});
  CHECK(pieces("Removed", false) == std::vector<std::string>{", ", "!"});
  CHECK(pieces("Isolated", true) == std::vector<std::string>{"ab", ", ", "cd", "!"});
  CHECK(pieces("Isolated", false) == std::vector<std::string>{"ab", ", ", "cd", "!"});

  // A script name is the Script property, as in Oniguruma and Rust: 。 is Common, not Han (PCRE2's
  // own reading of \p{Han} is Script_Extensions, which takes it in).
  auto han = [](const char* regex) {
    const nlohmann::json spec = {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}};
    std::vector<std::string> out;
    tx::PreTokenizer(spec, "han.json").split("漢字。世界", [&](std::string_view piece) { out.emplace_back(piece); });
    return out;
  };
  CHECK(han("[\\p{Han}]+") == std::vector<std::string>{"漢字", "。", "世界"});
  CHECK(han("\\p{Han}+") == std::vector<std::string>{"漢字", "。", "世界"});
  CHECK(han("\\p{scx:Han}+") == std::vector<std::string>{"漢字。世界"});  // said explicitly: as written
  CHECK(han("\\P{Han}+") == std::vector<std::string>{"漢字", "。", "世界"});
}

TEST_CASE("tokenizer: a file this cannot read faithfully is an error naming what, and bad text too") {
  auto error_of = [](const std::string& json) -> std::string {
    try {
      tx::Tokenizer::from_json(json, "t.json");
    } catch (const switchyard::InputError& e) {
      CHECK(e.exit_code() == switchyard::kExitBadContent);
      return e.what();
    }
    return "no error";
  };
  CHECK(error_of("{not json").find("t.json: not JSON") == 0);
  CHECK(error_of("[1, 2]").find("top level is not an object") != std::string::npos);
  nlohmann::json j = nlohmann::json::parse(small_tokenizer({"ab"}, {"a b"}));
  auto with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json copy = j;
    copy[nlohmann::json::json_pointer(pointer)] = value;
    return error_of(copy.dump());
  };
  CHECK(with("/model/type", "Unigram").find("type \"Unigram\" is not a model this tokenizer reads") != std::string::npos);
  CHECK(with("/model/merges", nlohmann::json::array({"a c"})).find("merge #0") != std::string::npos);
  CHECK(with("/model/byte_fallback", "yes").find("byte_fallback \"yes\" is not true or false") != std::string::npos);
  CHECK(with("/model/unk_token", "<nope>").find("unk_token") != std::string::npos);
  CHECK(with("/pre_tokenizer", {{"type", "Metaspace"}}).find("\"Metaspace\" is not supported") != std::string::npos);
  CHECK(with("/pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}})
            .find("does not compile") != std::string::npos);
  CHECK(with("/decoder", {{"type", "CTC"}}).find("decoder \"CTC\" is not supported") != std::string::npos);
  CHECK(with("/normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}).find("Replace pattern") != std::string::npos);
  CHECK(with("/normalizer", {{"type", "Lowercase"}}).find("\"Lowercase\" is not supported") != std::string::npos);
  nlohmann::json missing_byte = j;
  missing_byte["model"]["vocab"].erase("A");
  CHECK(error_of(missing_byte.dump()).find("vocab") != std::string::npos);

  // A pre-tokenizer regex that backtracks catastrophically stops with an error, not a hang.
  nlohmann::json runaway = j;
  runaway["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", nlohmann::json::array({{{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}},
                                                                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const tx::Tokenizer slow = tx::Tokenizer::from_json(runaway.dump(), "runaway.json");
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(slow.encode(std::string(40, 'a') + "b"), doctest::Contains("backtracking limit"), switchyard::InputError);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10.0 * switchyard::testing::kBuildSlowdown);

  const tx::Tokenizer t = tx::Tokenizer::from_json(j.dump(), "t.json");
  CHECK_THROWS_WITH_AS(t.encode("bad \xff byte"), doctest::Contains("not valid UTF-8 (at byte 4)"), switchyard::InputError);
  const std::vector<std::int32_t> outside{999999};
  CHECK_THROWS_WITH_AS(t.decode(outside), doctest::Contains("outside the vocabulary"), switchyard::InputError);
  CHECK_THROWS_AS(tx::Tokenizer::from_file("/nonexistent/tokenizer.json"), switchyard::InputError);
  CHECK(tx::complete_utf8_prefix("ab\xe4\xbd") == 2);  // 你 without its last byte
  CHECK(tx::complete_utf8_prefix("ab\xe4\xbd\xa0") == 5);
}

TEST_CASE("tokenizer: switchyard tokenize prints ids and pieces as tokenizers does") {
  const nlohmann::json expected = tokenizer_fixture("qwen3");
  const nlohmann::json& entry = expected["entries"][20];
  const std::string dir = real_tokenizer("qwen3").string();
  const auto r = switchyard::testing::run_switchyard("tokenize --tokenizer " + dir + " --format json --prompt '" +
                                                     entry["text"].get<std::string>() + "'");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json got = nlohmann::json::parse(r.output);
  CHECK(got["ids"] == entry["ids"]);
  CHECK(got["pieces"] == entry["tokens"]);
  const auto table = switchyard::testing::run_switchyard("tokenize --tokenizer " + dir + " --prompt 'Hello world'");
  CHECK(table.exit_code == 0);
  CHECK(table.output.find("2 tokens") != std::string::npos);
  // An empty prompt is a text too: its ids are what the post-processor adds to nothing (none for
  // either tokenizer.json; DeepSeek-V3's bos comes from tokenizer_config.json, which run reads).
  for (const char* name : {"qwen3", "deepseek_v3"}) {
    const std::string path = real_tokenizer(name).string();
    const auto empty = switchyard::testing::run_switchyard("tokenize --tokenizer " + path + " --format json --prompt ''");
    INFO(name << ": " << empty.output);
    REQUIRE(empty.exit_code == 0);
    const std::vector<std::int32_t> ids = nlohmann::json::parse(empty.output)["ids"];
    CHECK(ids == tx::Tokenizer::from_file(path).encode("", /*add_special=*/true));
    CHECK(ids.empty());
  }
  CHECK(switchyard::testing::run_switchyard("tokenize --tokenizer " + dir).exit_code == 2);  // nothing to encode
  CHECK(switchyard::testing::run_switchyard("tokenize --tokenizer " + dir + " --prompt '' --ids 1").exit_code == 2);
  CHECK(switchyard::testing::run_switchyard("tokenize --tokenizer /nonexistent --prompt x").exit_code == 2);
  switchyard::core_testing::TempDir dir_bad;
  std::ofstream(dir_bad / "tokenizer.json") << "{\"model\": 1}";
  CHECK(switchyard::testing::run_switchyard("tokenize --tokenizer " + dir_bad.path().string() + " --prompt x").exit_code == 1);
}

TEST_CASE("tokenizer: switchyard tokenize --ids spells ids back into the text they encode, special tokens included") {
  using switchyard::testing::run_switchyard;
  const std::string dir = real_tokenizer("deepseek_v3").string();
  // A special token, repeated pieces and a multi-byte character: what greedy continuations hold.
  const std::string text = "<｜begin▁of▁sentence｜>The river, where 家电家电 ran<｜tool▁output▁begin｜>私自私自";
  const auto encoded = run_switchyard("tokenize --tokenizer " + dir + " --format json --add_special false --prompt '" + text + "'");
  REQUIRE(encoded.exit_code == 0);
  const std::vector<std::int32_t> ids = nlohmann::json::parse(encoded.output)["ids"];
  REQUIRE(ids.size() > 6);
  std::string list;
  for (std::int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const auto decoded = run_switchyard("tokenize --tokenizer " + dir + " --format json --ids " + list);
  REQUIRE(decoded.exit_code == 0);
  const nlohmann::json got = nlohmann::json::parse(decoded.output);
  CHECK(got["text"] == text);
  CHECK(got["ids"] == ids);
  // token_ends: the text's length after each id, each prefix what those ids alone decode to.
  const std::vector<std::size_t> ends = got["token_ends"];
  REQUIRE(ends.size() == ids.size());
  CHECK(ends.back() == text.size());
  for (std::size_t k : {std::size_t{1}, ids.size() / 2, ids.size() - 1}) {
    std::string first;
    for (std::size_t i = 0; i < k; ++i) first += (i ? " " : "") + std::to_string(ids[i]);
    const auto prefix = run_switchyard("tokenize --tokenizer " + dir + " --ids '" + first + "'");
    REQUIRE(prefix.exit_code == 0);
    CHECK(prefix.output == text.substr(0, ends[k - 1]) + "\n");
  }
  const auto bad = switchyard::testing::run_switchyard_with_env("", "tokenize --tokenizer " + dir + " --ids 5,129000", true);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("'129000' is not a token id of this vocabulary") != std::string::npos);
  CHECK(run_switchyard("tokenize --tokenizer " + dir + " --ids 5 --prompt x").exit_code == 2);
}

TEST_CASE("tokenizer: run --prompt encodes text with the checkpoint's tokenizer and answers in text") {
  using switchyard::testing::run_switchyard;
  using switchyard::testing::run_switchyard_with_env;
  struct Case {
    const char* preset;
    const char* tokenizer;
    const char* profile;
  };
  for (const Case c : {Case{"tiny-qwen3-moe", "qwen3", "Qwen3-MoE-cpu.yaml"},
                       Case{"tiny-deepseek-v3", "deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml"}}) {
    INFO(c.preset);
    switchyard::core_testing::TempDir dir;
    const std::string model = (dir / "model").string();
    const auto made = run_switchyard("make-model --preset " + std::string(c.preset) + " --seed 4 --tokenizer " +
                                     real_tokenizer(c.tokenizer).string() + " --out " + model);
    REQUIRE(made.exit_code == 0);
    CHECK(std::filesystem::exists(std::filesystem::path(model) / "tokenizer.json"));
    const tx::Tokenizer t = tx::Tokenizer::from_file(model);
    const nlohmann::json config = nlohmann::json::parse(switchyard::core_testing::read_file(std::filesystem::path(model) / "config.json"));
    CHECK(config["vocab_size"] == t.vocab_size());  // sized to the tokenizer

    // A corpus text: its prompt ids are the ones HF tokenizers gave, after the bos that
    // tokenizer_config.json's add_bos_token asks for (DeepSeek-V3's; Qwen3 has none), as
    // transformers' tokenizer(text) puts it.
    const nlohmann::json expected = tokenizer_fixture(c.tokenizer);
    const nlohmann::json& entry = expected["entries"][4];
    const std::string text = entry["text"];
    const std::string profile = " --optimize_config_path " + source_path(std::string("optimize_rules/") + c.profile);
    const std::string run = "run --model_path " + model + profile + " --prompt '" + text + "' --max_new_tokens 8";
    const auto r = run_switchyard(run + " --format json");
    REQUIRE(r.exit_code == 0);
    const nlohmann::json doc = switchyard::testing::run_json(r.output);
    std::vector<std::int32_t> expected_ids;
    if (std::string(c.tokenizer) == "deepseek_v3") expected_ids.push_back(0);  // <｜begin▁of▁sentence｜>
    for (const auto& id : entry["ids"]) expected_ids.push_back(id.get<int>());
    CHECK(doc["prompt_ids"].get<std::vector<std::int32_t>>() == expected_ids);
    // The text is the generated ids decoded (special tokens left out), and plain `run` prints it
    // alone on stdout.
    const std::vector<std::int32_t> generated = doc["generated_ids"].get<std::vector<std::int32_t>>();
    CHECK(generated.size() == 8);
    CHECK(doc["text"] == t.decode(generated, /*skip_special=*/true));
    const auto plain = run_switchyard(run);
    REQUIRE(plain.exit_code == 0);
    CHECK(plain.output == t.decode(generated, /*skip_special=*/true) + "\n");

    // Errors a user can make, each before any weight is read.
    const auto both = run_switchyard_with_env("", "run --model_path " + model + profile + " --prompt hi --prompt_ids 1,2", true);
    CHECK(both.exit_code == 2);
    CHECK(both.output.find("not both") != std::string::npos);
  }
  // A tokenizer whose vocabulary the model cannot embed, and a model without one.
  switchyard::core_testing::TempDir dir;
  const std::string plain = (dir / "plain").string();
  REQUIRE(run_switchyard("make-model --preset tiny-qwen3-moe --out " + plain).exit_code == 0);
  const std::string profile = " --optimize_config_path " + source_path("optimize_rules/Qwen3-MoE-cpu.yaml");
  const auto none = run_switchyard_with_env("", "run --model_path " + plain + profile + " --prompt hi", true);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("the model has no tokenizer: give --tokenizer DIR") != std::string::npos);
  const auto larger = run_switchyard_with_env(
      "", "run --model_path " + plain + profile + " --prompt hi --tokenizer " + real_tokenizer("qwen3").string(), true);
  CHECK(larger.exit_code == 2);
  CHECK(larger.output.find("is larger than the model's") != std::string::npos);
}

TEST_CASE("tokenizer: sentencepiece-style BPE without byte tokens takes unk_token for an unknown character, fused with fuse_unk") {
  auto make = [](bool fuse) {
    const nlohmann::json root = {
        {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                               {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
        {"pre_tokenizer", nullptr},
        {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                                          {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", fuse}, {"byte_fallback", false},
                   {"vocab", {{"<unk>", 0}, {"\u2581", 1}, {"a", 2}, {"b", 3}, {"\u2581a", 4}}},
                   {"merges", {"\u2581 a"}}}}};
    return tx::Tokenizer::from_json(root.dump(), "test");
  };
  const tx::Tokenizer fused = make(true), separate = make(false);
  CHECK(fused.encode("a \u2603\u2603b") == std::vector<std::int32_t>{4, 1, 0, 3});  // ▁a ▁ <unk> b
  CHECK(separate.encode("a \u2603\u2603b") == std::vector<std::int32_t>{4, 1, 0, 0, 3});
  CHECK(fused.decode(std::vector<std::int32_t>{4, 1, 3}) == "a b");  // the leading space stripped once
  // Fields of the wrong type anywhere in the decoder or the added tokens: errors, never a throw of
  // the JSON library's own.
  for (const char* decoder : {R"({"type": "Sequence", "decoders": [5, {"type": "Fuse"}, {"type": "Strip", "content": 1, "start": "x", "stop": []}]})",
                              R"({"type": "Metaspace", "replacement": 7, "prepend_scheme": 3, "add_prefix_space": "no"})",
                              R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": 3, "content": null}]})"}) {
    nlohmann::json hostile = nlohmann::json::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
        "added_tokens": [{"id": 1, "content": "<x>", "special": "yes", "lstrip": 2}]})");
    hostile["decoder"] = nlohmann::json::parse(decoder);
    INFO(decoder);
    try {
      tx::Tokenizer::from_json(hostile.dump(), "test");
    } catch (const switchyard::InputError&) {
    }
  }
  // A Strip before Fuse would strip every token: refused by name.
  nlohmann::json bad = nlohmann::json::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "decoder": {"type": "Sequence", "decoders": [{"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})");
  CHECK_THROWS_WITH(tx::Tokenizer::from_json(bad.dump(), "test"), doctest::Contains("Strip"));
}
