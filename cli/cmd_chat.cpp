// switchyard chat: an interactive chat on a terminal, over a model placed and built as `run` does
// it. Each message typed is a user turn (cli/chat_input.h: line editing and history on a terminal,
// a trailing '\' or a paste for several lines); the model's answer streams as it is generated,
// then a stats line. Lines starting with '/' are commands (cli/chat_conversation.h: /help, /set,
// /show, /save, /load, /clear, /exit). Ctrl-C stops an answer (at the prompt, it leaves). The whole
// conversation is rendered by the chat template each turn. A message that cannot be a turn (not
// UTF-8, or one the template or tokenizer refuses) is reported and left out; the chat goes on.
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
  std::vector<std::string> stop;
  std::optional<bool> think;
  bool force_think = false;

  int run() {
    GenerationOptions generation = sampling.options();
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
      conversation.add("user", *line);
      serve::TextRequest request;
      serve::ChatPrompt prompt;
      try {
        prompt = serve::chat_prompt(model_text, conversation.messages(), think_options);
        request.prompt = model_text.tokenizer.encode(prompt.text, /*add_special=*/false);
      } catch (const InputError& e) {
        std::fprintf(stderr, "(that line was not sent: %s)\n", e.what());
        conversation.drop_last();
        continue;
      }
      request.generation = conversation.generation();
      request.generation.reuse = &kv_prefix;
      const std::int64_t room = lm.max_context() - static_cast<std::int64_t>(request.prompt.size());
      if (room < 1) {
        std::printf("(the conversation is %zu tokens, past the context of %lld: /clear it)\n", request.prompt.size(),
                    static_cast<long long>(lm.max_context()));
        conversation.drop_last();
        continue;
      }
      request.generation.max_new_tokens =
          static_cast<int>(std::min<std::int64_t>(conversation.generation().max_new_tokens, room));
      request.stop = stop;
      std::printf("%s", prompt.opening.c_str());
      const serve::TextResult answer = serve::generate_text(lm, model_text, request, [](std::string_view piece) {
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
  sub->add_option("--system", command->system, "a system message that opens the conversation");
  sub->add_option("--stop", command->stop, "end an answer where this text appears (repeatable)");
  sub->add_option("--think", command->think, "false: render the chat template with enable_thinking=false (Qwen3)");
  sub->add_flag("--force_think", command->force_think, "open every answer with <think>\\n (DeepSeek-R1)");
  command->sampling.max_new_tokens = 512;
  command->sampling.add_to(*sub, "most tokens in one answer (the context bounds it too)");
  command->engine.add_to(*sub);
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
