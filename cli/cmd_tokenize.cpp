// switchyard tokenize: text to token ids with a real tokenizer (text/tokenizer.h), as a table or JSON.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

struct TokenizeCommand {
  std::string tokenizer;
  std::string prompt;
  bool add_special = true;
  std::string format = "table";

  int run() const {
    if (format != "table" && format != "json") throw InputError("--format: '" + format + "' is not table or json");
    const text::Tokenizer t = text::Tokenizer::from_file(tokenizer);
    const std::vector<std::int32_t> ids = t.encode(prompt, add_special);
    if (format == "json") {
      nlohmann::json pieces = nlohmann::json::array();
      for (std::int32_t id : ids) pieces.push_back(std::string(t.token(id)));
      // Pieces are the vocabulary's spellings (valid UTF-8); dump replaces nothing.
      std::cout << nlohmann::json{{"ids", ids}, {"pieces", pieces}}.dump() << "\n";
      return 0;
    }
    std::printf("%zu tokens (vocabulary of %d)\n%8s  %s\n", ids.size(), t.vocab_size(), "ID", "PIECE");
    for (std::int32_t id : ids) std::printf("%8d  %s\n", id, nlohmann::json(std::string(t.token(id))).dump().c_str());
    return 0;
  }
};

}  // namespace

Runner add_tokenize_command(CLI::App& app) {
  auto command = std::make_shared<TokenizeCommand>();
  CLI::App* sub = app.add_subcommand("tokenize", "text to token ids with a model's tokenizer.json");
  sub->add_option("--tokenizer", command->tokenizer, "a tokenizer.json, or a directory holding one")->required();
  sub->add_option("--prompt", command->prompt, "the text (UTF-8)")->required();
  sub->add_option("--add_special", command->add_special,
                  "add the post-processor's special tokens (true|false), as tokenizers' encode does")
      ->capture_default_str();
  sub->add_option("--format", command->format, "table or json ({\"ids\": [...], \"pieces\": [...]})")->capture_default_str();
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
