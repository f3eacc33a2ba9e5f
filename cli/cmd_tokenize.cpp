// switchyard tokenize: text to token ids with a real tokenizer (text/tokenizer.h), as a table or JSON;
// with --messages, an OpenAI-style conversation rendered by the model's chat template first
// (text/chat_format.h), then encoded as transformers' apply_chat_template(tokenize=True) does
// (no post-processor tokens: the template writes its own); with --ids, the other way: ids to
// text, special tokens included (what an engine's greedy ids spell, to compare with another
// engine's text without encoding that text again).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/text.h"
#include "core/json_input.h"
#include "text/model_text.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

struct TokenizeCommand {
  std::string tokenizer;
  std::string prompt;
  std::string messages;
  std::string ids;
  bool add_special = true;
  bool add_generation_prompt = true;
  std::string format = "table";
  // Given or not, whatever the value: an empty --prompt is a text to encode (its ids are those of
  // nothing: [], or the special tokens the post-processor adds).
  const CLI::Option *prompt_given = nullptr, *messages_given = nullptr, *ids_given = nullptr;

  int run() const {
    if (format != "table" && format != "json") throw InputError("--format: '" + format + "' is not table or json");
    if ((prompt_given->count() > 0) + (messages_given->count() > 0) + (ids_given->count() > 0) != 1)
      throw InputError("give --prompt TEXT, --messages FILE.json or --ids LIST (one of them)");
    if (ids_given->count() > 0) return decode();
    if (messages_given->count() > 0) {
      const text::ModelText model_text = text::ModelText::load(tokenizer);  // a GGUF opened once
      const text::Tokenizer& t = model_text.tokenizer;
      const std::optional<text::ChatFormat>& chat = model_text.chat;
      if (!chat) throw InputError("--messages: the tokenizer at " + tokenizer + " has no chat template (tokenizer_config.json's chat_template, or a GGUF's tokenizer.chat_template)");
      const std::string body = read_input_file(messages, "--messages", std::uint64_t{64} << 20);
      nlohmann::ordered_json list = parse_json<nlohmann::ordered_json>(body, "--messages " + messages);
      // An OpenAI request body works too: its "messages".
      if (list.is_object() && list.contains("messages")) list = list["messages"];
      const std::string text = chat->render(list, add_generation_prompt);
      const std::vector<std::int32_t> ids = t.encode(text, /*add_special=*/false);
      if (format == "json") {
        std::cout << nlohmann::json{{"text", text}, {"ids", ids}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
      }
      std::printf("%s\n", text.c_str());
      print_table(t, ids);
      return 0;
    }
    const text::Tokenizer t = text::Tokenizer::from_file(tokenizer);
    const std::vector<std::int32_t> ids = t.encode(prompt, add_special);
    if (format == "json") {
      nlohmann::json pieces = nlohmann::json::array();
      for (std::int32_t id : ids) pieces.push_back(std::string(t.token(id)));
      // Pieces are the vocabulary's spellings (valid UTF-8); dump replaces nothing.
      std::cout << nlohmann::json{{"ids", ids}, {"pieces", pieces}}.dump() << "\n";
      return 0;
    }
    print_table(t, ids);
    return 0;
  }

  // --ids: the text of the ids, as raw UTF-8 (table) or JSON with `token_ends`: the text's length
  // in bytes after each id (decoding the first k ids gives the text's first token_ends[k-1] bytes).
  int decode() const {
    const text::ModelText model_text = text::ModelText::load(tokenizer);
    const text::Tokenizer& t = model_text.tokenizer;
    std::vector<std::int32_t> list;
    for (std::size_t at = 0; at <= ids.size();) {
      const std::size_t end = std::min(ids.find_first_of(", ", at), ids.size());
      const std::string part = ids.substr(at, end - at);
      at = end + 1;
      if (part.empty()) continue;
      std::size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != part.size() || id < 0 || id >= t.vocab_size())
        throw InputError("--ids: " + quoted_excerpt(part) + " is not a token id of this vocabulary (0 to " + std::to_string(t.vocab_size() - 1) + ")");
      list.push_back(static_cast<std::int32_t>(id));
    }
    std::vector<std::size_t> ends;
    const std::string text = t.decode(list, /*skip_special=*/false, format == "json" ? &ends : nullptr);
    if (format != "json") {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n");
      return 0;
    }
    std::cout << nlohmann::json{{"text", text}, {"ids", list}, {"token_ends", ends}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }

  static void print_table(const text::Tokenizer& t, const std::vector<std::int32_t>& ids) {
    std::printf("%zu tokens (vocabulary of %d)\n%8s  %s\n", ids.size(), t.vocab_size(), "ID", "PIECE");
    for (std::int32_t id : ids) std::printf("%8d  %s\n", id, nlohmann::json(std::string(t.token(id))).dump().c_str());
  }
};

}  // namespace

Runner add_tokenize_command(CLI::App& app) {
  auto command = std::make_shared<TokenizeCommand>();
  CLI::App* sub = app.add_subcommand("tokenize", "text to token ids with a model's tokenizer.json (or ids to text: --ids)");
  sub->add_option("--tokenizer", command->tokenizer, "a tokenizer.json, a directory holding one, or a GGUF")->required();
  command->prompt_given = sub->add_option("--prompt", command->prompt, "the text (UTF-8; \"\" too)");
  command->messages_given = sub->add_option("--messages", command->messages,
                  "a JSON file of OpenAI-style messages (or a request body holding them): rendered by the chat template, "
                  "then encoded; prints the text and the ids");
  command->ids_given = sub->add_option("--ids", command->ids,
                  "token ids (comma- or space-separated) to decode into text, special tokens included; json adds "
                  "token_ends, the text's length in bytes after each id");
  sub->add_option("--add_generation_prompt", command->add_generation_prompt,
                  "with --messages: end with the assistant's turn opening (true|false)")
      ->capture_default_str();
  sub->add_option("--add_special", command->add_special,
                  "add the post-processor's special tokens (true|false), as tokenizers' encode does")
      ->capture_default_str();
  sub->add_option("--format", command->format, "table or json ({\"ids\": [...], \"pieces\": [...]})")->capture_default_str();
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
