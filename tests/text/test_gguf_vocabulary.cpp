// A tokenizer carried in a GGUF's tokenizer.ggml.* keys (text/gguf_vocabulary.h): DeepSeek-V3's,
// Qwen3's, Llama 3's and GPT-4o's real tokenizer.json written into a GGUF and read back encode the
// fixture corpus id for id as the tokenizer.json does (and as HF tokenizers did), plus the BOS
// that add_bos_token asks for; every tokenizer.ggml.pre name splits the corpus as HF tokenizers
// splits it with its family's own pre-tokenizer; make-model --format gguf --tokenizer writes the keys and run --prompt reads them with
// no tokenizer.json beside the file; keys a GGUF cannot hold, or that do not make a tokenizer,
// are errors naming them.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf.h"
#include "core/gguf_writer.h"
#include "text/gguf_vocabulary.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"
#include "tests/tokenizer_test_support.h"

namespace sy = switchyard;
namespace tx = switchyard::text;
using sy::core_testing::TempDir;
using sy::testing::source_path;

using switchyard::testing::real_tokenizer;
using switchyard::testing::tokenizer_fixture;

namespace {

// A GGUF holding nothing but a vocabulary.
std::filesystem::path write_vocabulary(const tx::GgufVocabulary& v, const std::filesystem::path& file) {
  sy::GgufWriter writer;
  writer.set_string("general.architecture", "deepseek2");
  tx::write_gguf_vocabulary(v, writer);
  writer.write(file);
  return file;
}

}  // namespace

TEST_CASE("gguf vocabulary: real tokenizers written to a GGUF and read back encode the corpus as before") {
  struct Case {
    const char* package;
    const char* pre;
    bool adds_bos;      // tokenizer_config.json's add_bos_token
    bool has_template;  // tokenizer_config.json's chat_template
  };
  for (const Case c : {Case{"deepseek_v3", "deepseek-v3", true, true}, Case{"qwen3", "qwen2", false, true},
                       Case{"llama3", "llama-bpe", false, true}, Case{"gpt4o", "gpt-4o", false, false}}) {
    INFO(c.package);
    TempDir dir;
    const std::filesystem::path source = real_tokenizer(c.package);
    const tx::Tokenizer original = tx::Tokenizer::from_file(source);
    const std::int64_t vocab_size = original.vocab_size() + 7;  // an embedding wider than the tokenizer
    const tx::GgufVocabulary v = tx::gguf_vocabulary_from_files(source / "tokenizer.json", source / "tokenizer_config.json", vocab_size);
    CHECK(v.pre == c.pre);
    REQUIRE(v.tokens.size() == static_cast<std::size_t>(vocab_size));
    CHECK(v.tokens.back() == "[PAD" + std::to_string(vocab_size - 1) + "]");
    CHECK(v.token_types.back() == static_cast<std::int32_t>(tx::GgufTokenType::unused));
    CHECK(v.add_bos == c.adds_bos);
    CHECK(v.chat_template.empty() == !c.has_template);
    REQUIRE(v.eos.has_value());

    const sy::GgufFile file = sy::GgufFile::open(write_vocabulary(v, dir / "vocab.gguf"));
    CHECK(tx::gguf_has_vocabulary(file));
    if (c.has_template) CHECK(file.string("tokenizer.chat_template") == v.chat_template);
    const tx::Tokenizer back = tx::Tokenizer::from_file(dir / "vocab.gguf");
    CHECK(back.vocab_size() == vocab_size);
    CHECK(back.token(*v.eos) == original.token(*v.eos));
    CHECK(back.is_special(*v.eos));
    int checked = 0;
    const nlohmann::json corpus = tokenizer_fixture(c.package);
    for (const auto& entry : corpus["entries"]) {
      const std::string text = entry["text"];
      INFO(text);
      const std::vector<std::int32_t> expected = entry["ids"].get<std::vector<std::int32_t>>();
      CHECK(back.encode(text, /*add_special=*/false) == original.encode(text, false));
      CHECK(original.encode(text, true) == expected);
      std::vector<std::int32_t> with_special = expected;
      if (c.adds_bos) with_special.insert(with_special.begin(), *v.bos);
      CHECK(back.encode(text, /*add_special=*/true) == with_special);
      CHECK(back.decode(expected) == original.decode(expected));
      ++checked;
    }
    CHECK(checked >= 40);
  }
}

TEST_CASE("gguf vocabulary: every tokenizer.ggml.pre name splits the corpus as HF tokenizers does with its family's own") {
  const nlohmann::json fixture = tokenizer_fixture("pre_tokenizers");
  const nlohmann::json& families = fixture["families"];
  const nlohmann::json corpus = tokenizer_fixture("corpus");
  std::set<std::string> families_read;
  const std::vector<std::string> names = tx::gguf_pre_tokenizer_names();
  CHECK(names.size() >= 15);
  for (const std::string& name : names) {
    INFO(name);
    const std::optional<tx::GgufPreTokenizer> pre = tx::gguf_pre_tokenizer(name);
    REQUIRE(pre.has_value());
    families_read.insert(pre->family);
    REQUIRE(families.contains(pre->family));
    const nlohmann::json& pieces = families[pre->family]["pieces"];
    REQUIRE(pieces.size() == corpus.size());
    const tx::PreTokenizer ours(nlohmann::json::parse(pre->pre_tokenizer), name);
    CHECK(ours.byte_level());
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      const std::string text = corpus[i];
      INFO(text);
      std::vector<std::string> split;
      ours.split(text, [&](std::string_view piece) { split.emplace_back(piece); });
      INFO("ours: " << nlohmann::json(split).dump() << "\nHF tokenizers: " << pieces[i].dump());
      CHECK(split == pieces[i].get<std::vector<std::string>>());
    }
  }
  // Every family the fixture holds is one a name reads, and every family read has its pieces there.
  std::set<std::string> in_fixture;
  for (const auto& [family, entry] : families.items()) in_fixture.insert(family);
  CHECK(in_fixture == families_read);
  CHECK_FALSE(tx::gguf_pre_tokenizer("starcoder").has_value());
}

TEST_CASE("gguf vocabulary: a name of another model with the same split reads as its family's") {
  TempDir dir;
  const std::filesystem::path source = real_tokenizer("qwen3");
  const tx::Tokenizer original = tx::Tokenizer::from_file(source);
  tx::GgufVocabulary v = tx::gguf_vocabulary_from_files(source / "tokenizer.json", "", original.vocab_size());
  REQUIRE(v.pre == "qwen2");
  v.pre = "deepseek-r1-qwen";  // DeepSeek-R1's distillations of Qwen, as llama.cpp's converter names them
  const tx::Tokenizer back = tx::Tokenizer::from_file(write_vocabulary(v, dir / "alias.gguf"));
  const nlohmann::json corpus = tokenizer_fixture("qwen3");
  for (const auto& entry : corpus["entries"]) CHECK(back.encode(entry["text"].get<std::string>(), false) == entry["ids_plain"].get<std::vector<std::int32_t>>());
}

TEST_CASE("gguf vocabulary: make-model --format gguf --tokenizer writes it, run --prompt reads it from the file") {
  TempDir dir;
  const std::string model = (dir / "gguf").string();
  const auto made = sy::testing::run_switchyard("make-model --preset tiny-qwen3-moe --format gguf --dtype q8_0 --seed 3 --tokenizer " +
                                                real_tokenizer("qwen3").string() + " --out " + model);
  REQUIRE(made.exit_code == 0);
  std::filesystem::remove(std::filesystem::path(model) / "tokenizer.json");  // only the GGUF's keys remain
  const nlohmann::json corpus = tokenizer_fixture("qwen3");
  const nlohmann::json& entry = corpus["entries"][4];
  const std::string text = entry["text"];
  const auto r = sy::testing::run_switchyard("run --gguf_path " + model + " --prompt '" + text + "' --max_new_tokens 4 --format json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json doc = sy::testing::run_json(r.output);
  CHECK(doc["prompt_ids"] == entry["ids"]);
  CHECK(doc["text"].is_string());
  // tokenize takes the GGUF too.
  const auto t = sy::testing::run_switchyard("tokenize --tokenizer " + model + "/model.gguf --prompt '" + text + "' --format json");
  REQUIRE(t.exit_code == 0);
  CHECK(nlohmann::json::parse(t.output)["ids"] == entry["ids"]);
  // --override-kv reaches the tokenizer: a name of the same split runs, one this does not read is
  // refused with the remedies, and the flag without a GGUF is a usage error.
  const std::string base = "run --gguf_path " + model + " --prompt '" + text + "' --max_new_tokens 1 --format json";
  const auto alias = sy::testing::run_switchyard(base + " --override-kv tokenizer.ggml.pre=str:deepseek-r1-qwen");
  INFO(alias.output);
  REQUIRE(alias.exit_code == 0);
  CHECK(sy::testing::run_json(alias.output)["prompt_ids"] == entry["ids"]);
  const auto unknown = sy::testing::run_switchyard_with_env("", base + " --override-kv tokenizer.ggml.pre=str:starcoder", true);
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.output.find("tokenizer.ggml.pre: 'starcoder' is not a pre-tokenizer this reads") != std::string::npos);
  CHECK(sy::testing::run_switchyard(base + " --override-kv tokenizer.ggml.pre").exit_code == 2);
  CHECK(sy::testing::run_switchyard("check --arch deepseek-v3 --cpu-moe --override-kv a=int:1").exit_code == 2);
  // The GGUF carries the chat template too: rendered as transformers rendered Qwen3's.
  const nlohmann::json chats = nlohmann::json::parse(sy::core_testing::read_file(source_path("tests/fixtures/chat_templates/qwen3.json")));
  const nlohmann::json& chat = chats["cases"][1];
  std::ofstream(dir / "messages.json") << chat["messages"].dump();
  const auto m = sy::testing::run_switchyard("tokenize --tokenizer " + model + "/model.gguf --messages " + (dir / "messages.json").string() +
                                             " --format json");
  REQUIRE(m.exit_code == 0);
  CHECK(nlohmann::json::parse(m.output)["text"] == chat["text"]);
}

TEST_CASE("gguf vocabulary: what a GGUF cannot hold, and keys that make no tokenizer, are errors naming them") {
  TempDir dir;
  const std::filesystem::path source = real_tokenizer("qwen3");
  const std::string json = sy::core_testing::read_file(source / "tokenizer.json");
  nlohmann::json root = nlohmann::json::parse(json);
  // A pre-tokenizer no GGUF name stands for.
  nlohmann::json other = root;
  other["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+";
  CHECK_THROWS_WITH_AS(tx::gguf_vocabulary_from_json(other.dump(), "", 200000, "t.json"),
                       doctest::Contains("not those of a pre-tokenizer a GGUF names"), sy::InputError);
  // A model vocabulary narrower than the tokenizer.
  CHECK_THROWS_WITH_AS(tx::gguf_vocabulary_from_json(json, "", 1000, "t.json"), doctest::Contains("does not fit the model's vocabulary"),
                       sy::InputError);
  // A tokenizer_config.json naming an EOS that is not a token.
  CHECK_THROWS_WITH_AS(tx::gguf_vocabulary_from_json(json, R"({"eos_token": "<nope>"})", 200000, "t.json"),
                       doctest::Contains("eos_token '<nope>' is not a token"), sy::InputError);

  // Reading: a pre-tokenizer name this does not read, types of another length, no tokenizer at all.
  tx::GgufVocabulary v = tx::gguf_vocabulary_from_json(json, "", tx::Tokenizer::from_json(json, "q").vocab_size(), "t.json");
  auto read_back = [&](const tx::GgufVocabulary& changed, const char* name) {
    write_vocabulary(changed, dir / name);
    return tx::Tokenizer::from_file(dir / name);
  };
  tx::GgufVocabulary unknown = v;
  unknown.pre = "starcoder";
  // The error names the key and the value, lists the names read and gives both remedies.
  for (const char* part : {"tokenizer.ggml.pre: 'starcoder'", "joyai-llm", "kimi-k2", "--override-kv tokenizer.ggml.pre=str:",
                           "--tokenizer PATH"})
    CHECK_THROWS_WITH_AS(read_back(unknown, "pre.gguf"), doctest::Contains(part), sy::InputError);
  tx::GgufVocabulary short_types = v;
  short_types.token_types.pop_back();
  CHECK_THROWS_WITH_AS(read_back(short_types, "types.gguf"), doctest::Contains("tokenizer.ggml.token_type"), sy::InputError);
  // A spelling given to two ids: both ids and the spelling are named.
  tx::GgufVocabulary repeated = v;
  repeated.tokens[300] = repeated.tokens[200];
  const std::string both = "tokenizer.ggml.tokens: tokens 200 and 300 are both spelled '" + repeated.tokens[200] + "'";
  CHECK_THROWS_WITH_AS(read_back(repeated, "repeated.gguf"), doctest::Contains(both.c_str()), sy::InputError);
  CHECK(sy::core_testing::input_error_exit_code([&] { read_back(repeated, "repeated.gguf"); }) == sy::kExitBadContent);
  // Writing: an added token spelled as a vocabulary entry of another id.
  nlohmann::json twice = root;
  const std::string spelling = root["model"]["vocab"].begin().key();
  const std::int64_t first_id = root["model"]["vocab"].begin().value();
  twice["added_tokens"].push_back({{"id", 200000 - 1}, {"content", spelling}, {"special", false}});
  const std::string named = "tokens " + std::to_string(first_id) + " and 199999 are both spelled";
  CHECK_THROWS_WITH_AS(tx::gguf_vocabulary_from_json(twice.dump(), "", 200000, "t.json"), doctest::Contains(named.c_str()),
                       sy::InputError);
  tx::GgufVocabulary bad_merge = v;
  bad_merge.merges[3] = "nospace";
  CHECK_THROWS_WITH_AS(read_back(bad_merge, "merge.gguf"), doctest::Contains("tokenizer.ggml.merges"), sy::InputError);
  sy::GgufWriter none;
  none.set_string("general.architecture", "qwen3moe");
  none.set_string("tokenizer.ggml.model", "none");
  none.write(dir / "none.gguf");
  CHECK_FALSE(tx::gguf_has_vocabulary(sy::GgufFile::open(dir / "none.gguf")));
  CHECK_THROWS_WITH_AS(tx::Tokenizer::from_file(dir / "none.gguf"), doctest::Contains("carries no tokenizer"), sy::InputError);
}
