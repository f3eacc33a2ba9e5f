// text/model_text.h's plain prompts: a prompt starts with the bos that tokenizer_config.json's
// add_bos_token asks for, as transformers' tokenizer(text) and llama.cpp encode it, whether the
// tokenizer comes from a tokenizer.json (whose post-processor may add nothing, as DeepSeek-V3's)
// or from a GGUF (whose add_bos_token became its post-processor), and never twice.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gguf_writer.h"
#include "core/input_file.h"
#include "text/gguf_vocabulary.h"
#include "text/model_text.h"
#include "tests/core_test_support.h"
#include "tests/tokenizer_test_support.h"

namespace sy = switchyard;
namespace tx = switchyard::text;
using sy::core_testing::TempDir;
using sy::testing::real_tokenizer;

TEST_CASE("model text: a plain prompt starts with add_bos_token's bos, once, from a tokenizer.json or a GGUF") {
  const std::string text = "The history of the city begins with a small village by the river";
  struct Case {
    const char* package;
    bool adds_bos;  // tokenizer_config.json's add_bos_token
  };
  // DeepSeek-V3: the post-processor adds nothing, add_bos_token does. Qwen3: no bos at all.
  // Llama 2: its post-processor already puts <s> first; encode_prompt must not add a second.
  for (const Case c : {Case{"deepseek_v3", true}, Case{"qwen3", false}, Case{"llama2", true}}) {
    INFO(std::string(c.package));
    const std::filesystem::path source = real_tokenizer(c.package);
    const tx::ModelText json = tx::ModelText::load(source / "tokenizer.json");
    const std::vector<std::int32_t> plain = json.tokenizer.encode(text, /*add_special=*/false);
    const std::vector<std::int32_t> prompt = json.encode_prompt(text);
    CHECK(json.added_bos.has_value() == c.adds_bos);
    if (c.adds_bos) {
      REQUIRE(prompt.size() == plain.size() + 1);
      CHECK(prompt.front() == *json.added_bos);
      CHECK(std::vector<std::int32_t>(prompt.begin() + 1, prompt.end()) == plain);
      // A prompt that spells the bos itself keeps just that one (where add_bos_token adds it: a
      // post-processor's own <s>, as Llama 2's, comes before whatever the text spells, as in
      // transformers).
      if (std::string(c.package) == "deepseek_v3") {
        const std::string bos_text = json.tokenizer.token_bytes(*json.added_bos);
        CHECK(json.encode_prompt(bos_text + text) == prompt);
      }
    } else {
      CHECK(prompt == plain);
    }

    // The same tokenizer carried in a GGUF encodes the prompt alike.
    if (std::string(c.package) == "llama2") continue;  // a sentencepiece-style BPE: no GGUF vocabulary of ours
    TempDir dir;
    const tx::GgufVocabulary v = tx::gguf_vocabulary_from_files(source / "tokenizer.json", source / "tokenizer_config.json",
                                                                json.tokenizer.vocab_size());
    sy::GgufWriter writer;
    writer.set_string("general.architecture", "deepseek2");
    tx::write_gguf_vocabulary(v, writer);
    writer.write(dir / "vocab.gguf");
    const tx::ModelText gguf = tx::ModelText::load(dir / "vocab.gguf");
    CHECK(gguf.encode_prompt(text) == prompt);
  }
}

TEST_CASE("model text: add_bos_token with a bos_token the tokenizer lacks is an error naming the file") {
  const std::filesystem::path source = real_tokenizer("deepseek_v3");
  const std::string tokenizer = sy::read_input_file(source / "tokenizer.json", "tokenizer", tx::kMaxTokenizerJsonBytes);
  CHECK_THROWS_WITH_AS(tx::ModelText::from_texts(tokenizer, R"({"add_bos_token": true, "bos_token": "<nope>"})", "m"),
                       doctest::Contains("m tokenizer_config.json: add_bos_token asks for bos_token <nope>"),
                       sy::InputError);
  CHECK_THROWS_WITH_AS(tx::ModelText::from_texts(tokenizer, "{not json", "m"), doctest::Contains("not JSON"),
                       sy::InputError);
  // add_bos_token false, or no bos_token: nothing added.
  const tx::ModelText none = tx::ModelText::from_texts(tokenizer, R"({"add_bos_token": false, "bos_token": "<nope>"})", "m");
  CHECK_FALSE(none.added_bos.has_value());
}
