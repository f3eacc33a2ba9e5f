// switchyard serve: the OpenAI-compatible HTTP server (serve/http_server.h) over a model placed and
// built as `run` does it, with the model's tokenizer and chat template.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "core/error.h"
#include "serve/http_server.h"

namespace switchyard::cli {
namespace {

struct ServeCommand {
  ModelOptions model;
  SamplingFlags sampling;
  EngineFlags engine;
  std::string tokenizer;
  serve::ServerOptions server;
  std::optional<bool> think;
  bool force_think = false;
  int read_deadline_s = 60;
  std::size_t request_memory_mib = std::size_t{1} << 10;
  int parallel = 1;  // -np: the generations that run at once

  int run() {
    // SIGINT and SIGTERM end the server: blocked before any thread starts (the OpenMP and HTTP
    // threads inherit the mask) and taken by one thread that stops it. A client gone mid-write is
    // an error return of the write, not a SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    // The flags' sampling values are the defaults of requests that leave them out.
    const GenerationOptions defaults = sampling.options();
    server.defaults.sampling = defaults.sampling;
    server.defaults.seed = defaults.seed;
    server.read_deadline = std::chrono::seconds(read_deadline_s);
    server.request_memory_bytes = request_memory_mib << 20;
    server.think.think = think;
    server.think.force_think = force_think;
    if (server.served_model_name.empty()) throw InputError("--served_model_name: give a name");
    if (parallel != 1)
      throw InputError("--parallel (-np) " + std::to_string(parallel) +
                       ": serve runs one generation at a time, so -np 1 is all it takes; the others wait in the "
                       "queue (--max_queue)");
    apply_cpu_threads(engine.cpu_infer);
    ModelSession session(model, engine.prefill_chunk);
    const text::ModelText model_text = session.open_text(tokenizer);
    if (const std::optional<int> status = session.place(&model_text.tokenizer, /*dry_run=*/false)) return *status;
    CausalLM& lm = session.build(engine.settings());
    std::printf("load duration: %.4fs\nplacement: %s\n", session.load_seconds(), lm.placement_summary().c_str());
    std::printf("tokenizer: %s (%d tokens%s)\n", model_text.source.c_str(), model_text.tokenizer.vocab_size(),
                model_text.chat ? ", chat template" : ", no chat template: /v1/completions only");

    serve::OpenAiServer http(server, lm, model_text);
    const int port = http.bind();
    std::printf("serving %s on http://%s:%d/v1 (chat/completions, completions, models; /health), up to %zu requests waiting\n",
                server.served_model_name.c_str(), server.host.c_str(), port, server.max_queue);
    std::fflush(stdout);
    std::thread signals([&] {
      int signal_number = 0;
      sigwait(&stop_signals, &signal_number);
      if (signal_number != 0) http.stop();
    });
    http.run();
    // run() also returns when stopped without a signal: wake the signal thread so it can end.
    pthread_kill(signals.native_handle(), SIGTERM);
    signals.join();
    std::printf("serve: stopped\n");
    return 0;
  }
};

}  // namespace

Runner add_serve_command(CLI::App& app) {
  auto command = std::make_shared<ServeCommand>();
  CLI::App* sub = app.add_subcommand("serve", "an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)");
  command->model.add_to(*sub, /*profile_required=*/false);
  sub->add_option("--tokenizer", command->tokenizer, "a tokenizer.json or a directory holding one (default: beside the weights)");
  sub->add_option("--host", command->server.host, "the address to listen on")->capture_default_str();
  sub->add_option("--port", command->server.port, "the TCP port (0: any free one)")
      ->capture_default_str()
      ->transform(integer_range(0, 65535));
  sub->add_option("--api_key", command->server.api_key, "require 'Authorization: Bearer KEY' on every /v1 request");
  sub->add_option("--max_queue", command->server.max_queue, "requests that may wait behind the running one; more get 503")
      ->capture_default_str()
      ->transform(integer_range<std::size_t>(1, 4096));
  sub->add_option("--read_deadline_s", command->read_deadline_s,
                  "the seconds a client may take to send one request (line, headers and body); slower ones get 408")
      ->capture_default_str()
      ->transform(integer_range(1, 3600));
  sub->add_option("--max_client_connections", command->server.max_client_connections,
                  "connections one client address may keep waiting on their requests' bytes; more get 429")
      ->capture_default_str()
      ->transform(integer_range<std::size_t>(1, 1024));
  sub->add_option("--max_request_memory_mib", command->request_memory_mib,
                  "memory for request bodies being read and parsed, all together (a 32 MiB body takes 609); more get 503")
      ->capture_default_str()
      ->transform(integer_range<std::size_t>(16, std::size_t{1} << 20));
  sub->add_option("--parallel", command->parallel,
                  "llama.cpp's -np: generations at once; serve runs one at a time, so 1 (the others wait in the queue)")
      ->capture_default_str()
      ->transform(whole_number<int>());
  sub->add_option("--served_model_name,--model_name", command->server.served_model_name, "the model name /v1/models lists and answers carry")
      ->capture_default_str();
  sub->add_option("--think", command->think, "false: render the chat template with enable_thinking=false (Qwen3)");
  sub->add_flag("--force_think", command->force_think, "open every answer with <think>\\n (DeepSeek-R1)");
  command->sampling.add_to(*sub, "");
  command->engine.add_to(*sub);
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
