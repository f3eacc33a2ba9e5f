#include "cli/chat_conversation.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <new>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "core/text.h"

namespace switchyard::cli {
namespace {

// A saved conversation is text a person wrote: far below this.
constexpr std::uint64_t kMaxConversationBytes = 64ull << 20;

// `key` in the spelling /set uses: lower case, '-' as '_', llama.cpp's names as ours.
std::string canonical_key(std::string_view key) {
  std::string k = to_lower(key);
  for (char& c : k)
    if (c == '-') c = '_';
  if (k == "temp") return "temperature";
  if (k == "repeat_penalty") return "repetition_penalty";
  if (k == "n_predict") return "max_new_tokens";
  return k;
}

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
  const char* last = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), last, out);
  return !text.empty() && error == std::errc() && stop == last;
}

std::string format_float(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
  return text;
}

// `value`: an OpenAI-style list of {role, content} with the roles a chat template knows.
void check_messages(const nlohmann::ordered_json& value, const std::string& file) {
  if (!value.is_array()) throw InputError(file + ": not a conversation (a list of messages, or {\"messages\": [...]})", kExitBadContent);
  for (std::size_t i = 0; i < value.size(); ++i) {
    const nlohmann::ordered_json& m = value[i];
    const std::string where = file + ": message " + std::to_string(i);
    if (!m.is_object()) throw InputError(where + " is not an object", kExitBadContent);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw InputError(where + " has no string \"role\"", kExitBadContent);
    const std::string& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      throw InputError(where + " has the role " + quoted_excerpt(r) + " (system, user, assistant or tool)", kExitBadContent);
    const auto content = m.find("content");
    if (content == m.end() || !(content->is_string() || content->is_null()))
      throw InputError(where + " has no string \"content\"", kExitBadContent);
  }
}

}  // namespace

std::string chat_help() {
  return "commands:\n"
         "  /help                  this list\n"
         "  /set KEY VALUE         temperature, top_k, top_p, min_p, repetition_penalty, seed, max_new_tokens;\n"
         "                         /set system TEXT sets the system message (/set system \"\" removes it)\n"
         "  /show                  the model, its placement and the sampling\n"
         "  /save FILE             the conversation as JSON ({\"messages\": [...]})\n"
         "  /load FILE             a saved conversation (or a list of messages) replaces this one\n"
         "  /clear                 forget the conversation (the system message stays)\n"
         "  /exit                  leave (also /quit, or end of input)\n"
         "A line ending in \\ goes on on the next line; a paste is one message. Ctrl-C stops an answer.";
}

ChatConversation::ChatConversation(GenerationOptions generation, std::string system, std::string model_description)
    : generation_(std::move(generation)), system_(std::move(system)), model_description_(std::move(model_description)) {
  clear();
}

void ChatConversation::add(std::string_view role, std::string content) {
  messages_.push_back({{"role", std::string(role)}, {"content", std::move(content)}});
}

void ChatConversation::clear() {
  messages_ = nlohmann::ordered_json::array();
  if (!system_.empty()) add("system", system_);
}

ChatConversation::Command ChatConversation::command(std::string_view line, std::string& reply) {
  reply.clear();
  if (line.empty() || line.front() != '/') return Command::none;
  const std::size_t space = line.find(' ');
  const std::string name(line.substr(0, space));
  std::string_view rest = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  const bool bare = name == "/exit" || name == "/quit" || name == "/bye" || name == "/help" || name == "/?" ||
                    name == "/clear" || name == "/show";
  if (bare && !rest.empty()) {
    reply = name + " takes no argument (" + quoted_excerpt(rest) + " was given); /help lists the commands";
    return Command::handled;
  }
  if (name == "/exit" || name == "/quit" || name == "/bye") return Command::exit;
  if (name == "/help" || name == "/?") {
    reply = chat_help();
  } else if (name == "/clear") {
    clear();
    reply = "(conversation cleared)";
  } else if (name == "/show") {
    reply = show();
  } else if (name == "/set") {
    const std::size_t gap = rest.find(' ');
    if (rest.empty()) reply = "usage: /set KEY VALUE (/help lists the keys)";
    else reply = set(rest.substr(0, gap), gap == std::string_view::npos ? std::string_view() : rest.substr(gap + 1));
  } else if (name == "/save" || name == "/load") {
    if (rest.empty()) reply = "usage: " + name + " FILE";
    else reply = name == "/save" ? save(std::string(rest)) : load(std::string(rest));
  } else {
    const std::vector<std::string> names = {"/help", "/set", "/show", "/save", "/load", "/clear", "/exit", "/quit"};
    reply = "unknown command " + quoted_excerpt(name) + did_you_mean(name, names) + "; /help lists the commands";
  }
  return Command::handled;
}

std::string ChatConversation::set(std::string_view raw_key, std::string_view value) {
  const std::string key = canonical_key(raw_key);
  if (key == "system") {
    std::string text(value);
    if (text == "\"\"") text.clear();
    if (!valid_utf8(text)) return "the system message is not UTF-8";
    system_ = text;
    if (!messages_.empty() && messages_.front()["role"] == "system") messages_.erase(messages_.begin());
    if (!system_.empty()) messages_.insert(messages_.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", system_}});
    return system_.empty() ? "(no system message)" : "(system message set)";
  }
  GenerationOptions changed = generation_;
  bool parsed = false;
  if (key == "temperature") parsed = parse_number(value, changed.sampling.temperature);
  else if (key == "top_k") parsed = parse_number(value, changed.sampling.top_k);
  else if (key == "top_p") parsed = parse_number(value, changed.sampling.top_p);
  else if (key == "min_p") parsed = parse_number(value, changed.sampling.min_p);
  else if (key == "repetition_penalty") parsed = parse_number(value, changed.sampling.repetition_penalty);
  else if (key == "seed") parsed = parse_number(value, changed.seed);
  else if (key == "max_new_tokens") parsed = parse_number(value, changed.max_new_tokens);
  else {
    const std::vector<std::string> keys = {"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "seed",
                                           "max_new_tokens", "system"};
    return "unknown setting " + quoted_excerpt(raw_key) + did_you_mean(key, keys) + " (" + join(keys, ", ") + ")";
  }
  if (!parsed) return "/set " + key + ": " + quoted_excerpt(value) + " is not a number";
  try {
    check_generation_options(changed);
  } catch (const InputError& e) {
    return "/set " + key + ": " + e.what();
  }
  generation_ = changed;
  return key + " = " + std::string(value);
}

std::string ChatConversation::show() const {
  const cpu::SamplingParams& s = generation_.sampling;
  std::ostringstream out;
  out << model_description_ << "\n"
      << "sampling: " << (s.temperature <= 0 ? "greedy (temperature 0)" : "temperature " + format_float(s.temperature))
      << ", top_k " << s.top_k << ", top_p " << format_float(s.top_p) << ", min_p " << format_float(s.min_p)
      << ", repetition_penalty " << format_float(s.repetition_penalty) << ", seed " << generation_.seed
      << ", max_new_tokens " << generation_.max_new_tokens << "\n"
      << "system: " << (system_.empty() ? "(none)" : quoted_excerpt(system_)) << "\n"
      << "conversation: " << messages_.size() << " message(s)";
  return out.str();
}

std::string ChatConversation::save(const std::string& file) const {
  try {
    write_file_atomically(file, nlohmann::ordered_json{{"messages", messages_}}.dump(2) + "\n");
  } catch (const InputError& e) {
    return std::string("not saved: ") + e.what();
  }
  return "(" + std::to_string(messages_.size()) + " message(s) saved to " + file + ")";
}

std::string ChatConversation::load(const std::string& file) {
  nlohmann::ordered_json loaded;
  try {
    const std::string text = read_input_file(file, "/load", kMaxConversationBytes);
    loaded = parse_json<nlohmann::ordered_json>(text, file);
    if (loaded.is_object() && loaded.contains("messages")) loaded = nlohmann::ordered_json(loaded["messages"]);
    check_messages(loaded, file);
  } catch (const InputError& e) {
    return std::string("not loaded: ") + e.what();
  } catch (const std::bad_alloc&) {
    return "not loaded: " + file + " needs more memory than this machine has";
  }
  messages_ = std::move(loaded);
  system_ = !messages_.empty() && messages_.front()["role"] == "system" && messages_.front()["content"].is_string()
                ? messages_.front()["content"].get<std::string>()
                : std::string();
  return "(" + std::to_string(messages_.size()) + " message(s) loaded from " + file + ")";
}

}  // namespace switchyard::cli
