// switchyard bench tokenize: a tokenizer's encode speed on one core, in MB of UTF-8 a second.
// The text mixes the test corpus (English, CJK, code, emoji, whitespace runs) with words made of
// random vocabulary entries, so that the BPE's piece cache does not see only repeats.
#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/input_file.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

struct BenchTokenizeCommand {
  std::string tokenizer;
  std::string corpus = std::string(SWITCHYARD_SOURCE_DIR) + "/tests/fixtures/tokenizers/corpus.json";
  int megabytes = 8;
  int repeat = 3;

  int run() const {
    const auto load_start = std::chrono::steady_clock::now();
    const text::Tokenizer t = text::Tokenizer::from_file(tokenizer);
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    std::vector<std::string> texts;
    try {
      texts = nlohmann::json::parse(read_input_file(corpus, "corpus", 64ULL << 20)).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw InputError(corpus + ": not a JSON list of strings: " + e.what(), kExitBadContent);
    }
    if (texts.empty()) throw InputError(corpus + ": the corpus is empty", kExitBadContent);
    std::mt19937 random(7);
    std::uniform_int_distribution<std::size_t> pick_text(0, texts.size() - 1);
    std::uniform_int_distribution<std::int32_t> pick_token(0, t.vocab_size() - 1);
    std::string text;
    const std::size_t bytes = static_cast<std::size_t>(megabytes) << 20;
    while (text.size() < bytes) {
      text += texts[pick_text(random)];
      text += ' ';
      for (int i = 0; i < 8; ++i) {  // a "word" of random vocabulary entries, whole characters only
        const std::int32_t id = pick_token(random);
        if (t.is_special(id)) continue;
        const std::string piece = t.token_bytes(id);
        bool whole = true;  // whole characters: a token may hold part of one
        for (std::size_t at = 0; at < piece.size() && whole;) whole = text::next_code_point(piece, at).has_value();
        if (whole) text += piece;
      }
      text += ' ';
    }
    std::vector<double> seconds;
    std::size_t ids = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      ids = t.encode(text, false).size();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("bench tokenize: %s (vocabulary of %d, loaded in %.2f s)\n", tokenizer.c_str(), t.vocab_size(), load_seconds);
    std::printf("text: %.1f MB of mixed UTF-8 (%s and random vocabulary words), %zu ids, %.2f bytes an id\n", mb,
                corpus.c_str(), ids, static_cast<double>(text.size()) / static_cast<double>(ids));
    std::printf("encode, one thread: best %.3f s = %.1f MB/s; first (cold cache) %.1f MB/s; target >= 5 MB/s a core\n",
                seconds.front(), mb / seconds.front(), mb / seconds.back());
    return 0;
  }
};

}  // namespace

Runner add_bench_tokenize_command(CLI::App& bench) {
  auto command = std::make_shared<BenchTokenizeCommand>();
  CLI::App* sub = bench.add_subcommand("tokenize", "a tokenizer's encode speed on one core, MB/s of mixed text");
  sub->add_option("--tokenizer", command->tokenizer, "a tokenizer.json, or a directory holding one")->required();
  sub->add_option("--corpus", command->corpus, "a JSON list of texts to mix in")->capture_default_str();
  sub->add_option("--megabytes", command->megabytes, "MB of text to encode")->capture_default_str()->transform(integer_range(1, 1024));
  sub->add_option("--repeat", command->repeat, "encodes to time")->capture_default_str()->transform(integer_range(1, 100));
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
