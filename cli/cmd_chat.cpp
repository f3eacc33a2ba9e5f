// switchyard chat: an interactive chat on a terminal, over a model placed and built as `run` does
// it. Each message typed is a user turn (cli/chat_input.h: line editing and history on a
// terminal, a trailing '\' or a paste for several lines); the model's answer streams as it is
// generated, then a stats line. Lines starting with '/' are commands (cli/chat_conversation.h:
// /help, /set, /show, /save, /load, /clear, /exit). Ctrl-C stops an answer (at the prompt, it
// leaves). The whole conversation is rendered by the chat template each turn. A message that
// cannot be a turn (not UTF-8, or one the template or tokenizer refuses) is reported and left out;
// the chat goes on. As in llama.cpp's conversation mode, -p TEXT (or -f FILE) is the first user
// turn, sent as it is (a leading '/' is text, not a command) before anything is read; the chat
// goes on after its answer, and ends there when the input does. Its text is checked before the
// model loads. -sys / --system-prompt are llama.cpp's names of --system.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/chat_conversation.h"
#include "cli/chat_input.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/text.h"
#include "serve/text_generation.h"

namespace switchyard::cli {
namespace {

std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted = true; }

struct ChatCommand {
  ModelOptions model;
  SamplingFlags sampling;
  EngineFlags engine;
  std::string tokenizer;
  std::string system;
  std::string first_message;  // -p
  std::string first_message_file;  // -f
  std::vector<std::string> stop;
  std::optional<bool> think;
  bool force_think = false;

  // What one turn works on.
  struct Turn {
    CausalLM& lm;
    const text::ModelText& model_text;
    const serve::ThinkOptions& think_options;
    ChatConversation& conversation;
    KvPrefix& kv_prefix;
  };

  // Sends `message` (UTF-8) as the user's turn and streams the answer, then the stats line. A
  // message the template or tokenizer refuses, or one past the context, is reported and left out.
  void send(const Turn& turn, const std::string& message) const {
    ChatConversation& conversation = turn.conversation;
    conversation.add("user", message);
    serve::TextRequest request;
    serve::ChatPrompt prompt;
    try {
      prompt = serve::chat_prompt(turn.model_text, conversation.messages(), turn.think_options);
      request.prompt = turn.model_text.tokenizer.encode(prompt.text, /*add_special=*/false);
    } catch (const InputError& e) {
      std::fprintf(stderr, "(that line was not sent: %s)\n", e.what());
      conversation.drop_last();
      return;
    }
    request.generation = conversation.generation();
    request.generation.reuse = &turn.kv_prefix;
    const std::int64_t room = turn.lm.max_context() - static_cast<std::int64_t>(request.prompt.size());
    if (room < 1) {
      std::printf("(the conversation is %zu tokens, past the context of %lld: /clear it)\n", request.prompt.size(),
                  static_cast<long long>(turn.lm.max_context()));
      conversation.drop_last();
      return;
    }
    request.generation.max_new_tokens =
        static_cast<int>(std::min<std::int64_t>(conversation.generation().max_new_tokens, room));
    request.stop = stop;
    std::printf("%s", prompt.opening.c_str());
    const serve::TextResult answer = serve::generate_text(turn.lm, turn.model_text, request, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return !interrupted.load();
    });
    // The answer's bytes are the model's: a random or a cut answer may hold bytes that are not
    // UTF-8, which the next turn's template and tokenizer could not take.
    conversation.add("assistant", replace_invalid_utf8(prompt.opening + answer.text));
    const GenerationStats& s = answer.stats;
    std::printf("\n[%lld prompt tokens (%lld cached) in %.2f s, %lld answer tokens at %.2f tokens/s; %s]\n",
                static_cast<long long>(answer.prompt_tokens), static_cast<long long>(s.cached_tokens), s.prompt_seconds,
                static_cast<long long>(answer.completion_tokens),
                s.decode_seconds > 0 ? s.generated_tokens / s.decode_seconds : 0.0,
                answer.finish == serve::TextFinish::cancelled ? "stopped" :
                answer.finish == serve::TextFinish::length ? "--max_new_tokens reached" : "end of turn");
  }

  // -p's text or -f's file's, checked before the model loads: "" where neither is given.
  std::string opening_message() const {
    std::string text = first_message;
    const char* flag = "--prompt";
    if (!first_message_file.empty()) {
      flag = "--file";
      // A message is at most the context's tokens; a file of more than this is not one.
      text = read_input_file(first_message_file, "--file", std::uint64_t{64} << 20);
      // less one final newline (an editor's), as run and llama.cpp read -f
      if (!text.empty() && text.back() == '\n') {
        text.pop_back();
        if (!text.empty() && text.back() == '\r') text.pop_back();
      }
      if (text.empty()) throw InputError("--file: " + quoted_excerpt(first_message_file) + " is empty");
    }
    std::size_t bad_at = 0;
    if (!valid_utf8(text, &bad_at))
      throw InputError(std::string(flag) + ": the message is not UTF-8 at byte " + std::to_string(bad_at) + ": " +
                       quoted_excerpt(text));
    return text;
  }

  int run() {
    GenerationOptions generation = sampling.options();
    const std::string opening = opening_message();
    apply_cpu_threads(engine.cpu_infer);
    ModelSession session(model, engine.prefill_chunk);
    const text::ModelText model_text = session.open_text(tokenizer);
    if (!model_text.chat)
      throw InputError(model_text.source + " has no chat template (tokenizer_config.json's chat_template, or a GGUF's "
                       "tokenizer.chat_template): chat needs one; `run --prompt` continues plain text");
    if (const std::optional<int> status = session.place(&model_text.tokenizer, /*dry_run=*/false)) return *status;
    CausalLM& lm = session.build(engine.settings());
    std::printf("load duration: %.4fs\nplacement: %s\n", session.load_seconds(), lm.placement_summary().c_str());
    std::printf("chat: type a message and Enter (a line ending in \\ goes on); /help lists the commands, /exit "
                "leaves; Ctrl-C stops an answer\n");
    // Ctrl-C without SA_RESTART: it ends an answer, or the read of the prompt (which leaves).
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);

    const serve::ThinkOptions think_options{think, force_think};
    const ModelOptions& chosen = session.chosen();
    const std::string model_name = session.embedded()            ? "the built-in tiny DeepSeek-V3 model"
                                   : !chosen.gguf_path.empty()    ? chosen.gguf_path
                                   : !chosen.model_path.empty()   ? chosen.model_path
                                                                  : chosen.arch;
    ChatConversation conversation(generation, system,
                                  "model: " + model_name + " (" + model_text.source + ")\nplacement: " + lm.placement_summary());
    ChatInput input;
    KvPrefix kv_prefix;  // each turn prefills only what the conversation added since the last
    const Turn turn{lm, model_text, think_options, conversation, kv_prefix};
    if (!opening.empty()) {
      std::printf("\n> %s\n", opening.c_str());
      interrupted = false;
      send(turn, opening);
    }
    for (;;) {
      std::printf("\n");
      interrupted = false;
      const std::optional<std::string> line = input.read("> ", "... ");
      if (!line) break;
      if (line->empty()) continue;
      std::string reply;
      const ChatConversation::Command command = conversation.command(*line, reply);
      if (command == ChatConversation::Command::exit) break;
      if (command == ChatConversation::Command::handled) {
        std::printf("%s\n", reply.c_str());
        continue;
      }
      std::size_t bad_at = 0;
      if (!valid_utf8(*line, &bad_at)) {
        std::fprintf(stderr, "(that line is not UTF-8 at byte %zu, so it was not sent: %s)\n", bad_at,
                     quoted_excerpt(*line).c_str());
        continue;
      }
      send(turn, *line);
    }
    std::printf("\n");
    return 0;
  }
};

}  // namespace

Runner add_chat_command(CLI::App& app) {
  auto command = std::make_shared<ChatCommand>();
  CLI::App* sub = app.add_subcommand("chat", "an interactive chat on the terminal, with the model's chat template");
  command->model.add_to(*sub, /*profile_required=*/false);
  sub->add_option("--tokenizer", command->tokenizer, "a tokenizer.json or a directory holding one (default: beside the weights)");
  sub->add_option("--system,--system-prompt", command->system,
                  "a system message that opens the conversation (llama.cpp's -sys)");
  CLI::Option* prompt = sub->add_option("-p,--prompt", command->first_message,
                                        "the first user message, sent before the first read; the chat goes on "
                                        "after its answer (ends there at the end of input)");
  sub->add_option("-f,--file", command->first_message_file, "the first user message from a file (less a final newline)")
      ->excludes(prompt);
  sub->add_option("--stop", command->stop, "end an answer where this text appears (repeatable)");
  sub->add_option("--think", command->think, "false: render the chat template with enable_thinking=false (Qwen3)");
  sub->add_flag("--force_think", command->force_think, "open every answer with <think>\\n (DeepSeek-R1)");
  command->sampling.max_new_tokens = 512;
  command->sampling.add_to(*sub, "most tokens in one answer (the context bounds it too)");
  command->engine.add_to(*sub);
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
