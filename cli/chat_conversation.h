#pragma once
// What `chat` keeps between turns, and the slash commands that read and change it: the messages
// (an OpenAI-style list, the system message first when there is one), the sampling of the next
// answers, and the stop strings. The terminal loop (cli/cmd_chat.cpp) sends every line that is
// not a command to the model; this file knows nothing of the model, so its commands are tested
// without one.
//
//   /help                 the commands
//   /set KEY VALUE        temperature, top_k, top_p, min_p, repetition_penalty, seed, max_new_tokens,
//                         system (the rest of the line; "" removes it)
//   /show                 the model, its placement and the sampling
//   /save FILE            the conversation as JSON ({"messages": [...]}), written whole or not at all
//   /load FILE            a conversation saved so (or a bare list of messages) replaces this one
//   /clear                forgets the conversation, keeps the system message
//   /exit, /quit          leaves
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "operators/model/generator.h"

namespace switchyard::cli {

class ChatConversation {
 public:
  // `generation`: the sampling the command line gave (already checked); `model_description`:
  // what /show prints of the model and its placement.
  ChatConversation(GenerationOptions generation, std::string system, std::string model_description);

  enum class Command { none, handled, exit };
  // A line starting with '/' is a command: it is carried out and what it says goes to `reply`
  // (an error, such as an unknown command or a value out of range, is a reply too, never an
  // exception). Any other line is Command::none, left for the model.
  Command command(std::string_view line, std::string& reply);

  // The conversation as the chat template takes it.
  const nlohmann::ordered_json& messages() const { return messages_; }
  void add(std::string_view role, std::string content);
  void drop_last() { messages_.erase(messages_.end() - 1); }
  const GenerationOptions& generation() const { return generation_; }

 private:
  std::string set(std::string_view key, std::string_view value);
  std::string show() const;
  std::string save(const std::string& file) const;
  std::string load(const std::string& file);
  void clear();

  GenerationOptions generation_;
  std::string system_;
  std::string model_description_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

// The help text of the commands above.
std::string chat_help();

}  // namespace switchyard::cli
