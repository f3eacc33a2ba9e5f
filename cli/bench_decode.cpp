#include "cli/bench_decode.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/model_description.h"
#include "core/statistics.h"
#include "core/stream_triad.h"
#include "core/trace.h"
#include "core/units.h"
#include "operators/model/causal_lm.h"
#include "operators/cpu/kernels/isa.h"
#include "operators/measure/kernel_timeline.h"
#include "operators/cpu/kernels/sampling.h"
#include "placement/memory_estimate.h"
#include "placement/report.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/measure/bandwidth.h"
#include "operators/cuda/measure/leave_out.h"
#include "operators/cuda/measure/sm_clock.h"
#include "operators/cuda/measure/timeline.h"
#endif

namespace switchyard::cli {
namespace {

using Clock = std::chrono::steady_clock;

#if SWITCHYARD_HAVE_CUDA
constexpr bool kWithCuda = true;
#else
constexpr bool kWithCuda = false;
#endif

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// "a,b,,c" -> {"a", "b", "c"}
[[maybe_unused]] std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    if (comma > at) parts.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return parts;
}

// Bytes of routed-expert weights one token reads, per device that runs them in decode.
struct ExpertTraffic {
  double cpu_bytes = 0, gpu_bytes = 0;  // per token
  double gpu_resident_bytes = 0;        // all routed experts held by GPUs (for decode or prefill)
};

ExpertTraffic expert_traffic(const CheckResult& check) {
  ExpertTraffic traffic;
  const ModelConfig& c = check.tree->config();
  for (const Module& m : check.tree->modules()) {
    const auto index = static_cast<int>(&m - check.tree->modules().data());
    if (!check.tree->is_routed_experts(index) || m.children.empty()) continue;
    double expert_bytes = 0;
    for (int p : check.tree->at(m.children.front()).children)
      for (const Parameter& param : check.tree->at(p).params)  // as stored: the tree has the checkpoint's dtypes
        expert_bytes += static_cast<double>(storage_bytes(param.dtype, param.shape.elements()));
    const ModulePlacement& owner = check.plan.owner_of(index);
    const double per_token = expert_bytes * c.num_experts_per_tok;
    (owner.generate_device.is_cpu() ? traffic.cpu_bytes : traffic.gpu_bytes) += per_token;
    for (const Device& d : weight_devices(owner))
      if (d.is_cuda()) traffic.gpu_resident_bytes += expert_bytes * static_cast<double>(m.children.size());
  }
  return traffic;
}

// The model's greedy decode as the bench takes it: from the token and position reached so far,
// every timing at new positions.
struct BenchSteps {
  CausalLM& lm;
  std::int32_t next;
  std::int64_t position;
  int timed;       // steps a timing
  bool hybrid;     // CPU experts: the GPU side is timed with their work skipped
  double layers;
  int gpu_index;   // the first GPU with weights (its clock is printed), or -1
  // Each step queued after the last one's CPU jobs and token (forward_greedy), not chained.
  bool one_at_a_time = false;

  // As `run` decodes: the choice is made where the head runs, and where decode steps are graphs
  // they follow each other on the device (CausalLM::decode_greedy).
  void decode(int steps) {
    if (one_at_a_time) {
      for (int i = 0; i < steps; ++i) next = lm.forward_greedy(std::span(&next, 1), position++);
      return;
    }
    lm.decode_greedy(next, position, steps, [&](std::int32_t id) {
      next = id;
      return true;
    });
    position += steps;
  }
  // Seconds a decode step after two untimed ones (a capture, a warm-up).
  double time_steps() {
    decode(2);
    const auto begin = Clock::now();
    decode(timed);
    return seconds_since(begin) / timed;
  }
  // The same with the CPU experts' work skipped in a hybrid placement (their hand-offs kept): the GPU
  // side alone.
  double time_gpu_side() {
    lm.skip_cpu_expert_work(hybrid);
    const double seconds = time_steps();
    lm.skip_cpu_expert_work(false);
    return seconds;
  }
  double per_layer_us(double seconds) const { return seconds * 1e6 / layers; }
};

#if SWITCHYARD_HAVE_CUDA
// The latency-bound chain scales with the SM clock, which is not locked: printed beside it.
double sm_clock(const BenchSteps& steps) {
  return steps.gpu_index >= 0 ? cuda::measure_sm_clock_mhz(steps.gpu_index) : 0.0;
}

// Each --leave_out group: the same steps with those kernels left out (captured again), against all
// of them, both timed here at similar context lengths. The results are wrong; the time is the
// measure. One step at a time: a left-out kernel that waits for the CPU experts (the norm that
// takes their row) lets the GPU run a step ahead of the worker, whose flags would then be
// overwritten before it reads them.
void print_leave_out(BenchSteps& steps, const std::vector<std::string>& groups) {
  if (groups.empty()) return;
  steps.one_at_a_time = true;
  const double gpu_side = steps.time_gpu_side();
  std::printf("the GPU side one step at a time, all kernels: %.3f ms/token\n", gpu_side * 1e3);
  for (const std::string& group : groups) {
    cuda::leave_out_kernels(comma_separated(group));
    steps.lm.discard_decode_graph();
    const double without = steps.time_gpu_side();
    const std::vector<std::string> names = cuda::kernels_left_out();
    cuda::leave_out_kernels({});
    steps.lm.discard_decode_graph();
    std::printf("left out %s (%zu kernels): %.3f ms/token, %+.1f us per layer against all kernels\n", group.c_str(),
                names.size(), without * 1e3, steps.per_layer_us(without - gpu_side));
    for (const std::string& name : names) std::printf("  %s\n", name.c_str());
  }
  steps.one_at_a_time = false;
}

// How far (a share) the timeline's step may be from the host's timing of it before the timeline is
// said to be off: the host's mean includes the steps' launches, within ~1%.
constexpr double kClockDisagreement = 0.05;

// --timeline: one step queued with its launches recorded (a capture, where graphs are used), then
// the GPU side timed again with the stamps on.
void print_timeline(BenchSteps& steps, double gpu_side) {
  steps.lm.skip_cpu_expert_work(steps.hybrid);
  cuda::record_launches();
  steps.lm.discard_decode_graph();
  steps.next = steps.lm.forward_greedy(std::span(&steps.next, 1), steps.position++);
  const std::vector<std::string> launches = cuda::recorded_launches();
  // The decoder layers: from the first layer's first launch up to the head's GEMV, the final norm
  // included (it takes the last layer's CPU experts' row in a hybrid step).
  std::optional<LaunchSpan> layers;
  for (const cuda::LaunchMark& mark : cuda::recorded_marks()) {
    if (mark.label == cuda::kLayersMark) layers = LaunchSpan{mark.launch, mark.launch};
    if (mark.label == cuda::kHeadMark && layers) layers->to = mark.launch + 1;
  }
  std::vector<std::uint64_t> stamps;
  std::uint64_t taken = 0;
  double with_stamps = 0;
  {
    const cuda::Timeline stamping(launches.size() * static_cast<std::size_t>(steps.timed + 2));
    with_stamps = steps.time_gpu_side();
    stamps = stamping.stamps(&taken);
  }
  std::printf("\nthe GPU side with stamps: %.3f ms/token (without: %.3f); %llu stamps\n", with_stamps * 1e3,
              gpu_side * 1e3, static_cast<unsigned long long>(taken));
  try {
    const KernelTimeline timeline = analyse_kernel_timeline(launches, stamps, layers);
    // The stamps' clock against the host's, over the same steps: some machines' GPU timers run
    // apart from it.
    const double host_step_us = with_stamps * 1e6;
    if (std::abs(timeline.step_us / host_step_us - 1) > kClockDisagreement)
      std::printf("the GPU's timer disagrees with the host's clock here (a step %.1f us against %.1f): the timeline "
                  "below says little\n",
                  timeline.step_us, host_step_us);
    std::printf("%s", format_kernel_timeline(timeline).c_str());
    if (layers)
      std::printf("the decoder layers alone (the first one's wait end to the head's, stamps on): %.1f us a "
                  "step, %.1f us per layer; the rest of the step (embedding, head, choice, hand-over) %.1f us\n",
                  timeline.span_us, timeline.span_us / steps.layers, timeline.step_us - timeline.span_us);
  } catch (const InputError& e) {
    std::printf("no timeline: %s\n", e.what());
  }
}
#endif

// A line of --ab_option's A/B: each side's median and its timings in order; B - A, or B / A.
void print_ab_line(const std::string& assignments, const char* what, const std::vector<double> (&sides)[2],
                   int decimals, bool ratio) {
  auto runs = [](const std::vector<double>& values) {
    std::string text;
    for (const double v : values) text += (text.empty() ? "" : " ") + std::to_string(v).substr(0, 5);
    return text;
  };
  const double a = median(sides[0]), b = median(sides[1]);
  std::printf("A/B %s, %s: A median %.*f (%s); B median %.*f (%s); ", assignments.c_str(), what, decimals, a,
              runs(sides[0]).c_str(), decimals, b, runs(sides[1]).c_str());
  if (ratio) std::printf("B / A %.3f\n", b / a);
  else std::printf("B - A %+.*f\n", decimals, b - a);
}

// --ab_option: the CPU kernel options the flags give (A) and those with the assignments (B), both
// in this process, A B B A ...: per side the GPU side where a GPU takes part, the whole step where
// the CPU takes part in decode (CPU experts, or all on the CPU), and the prompt's prefill
// (`prefill_seconds`, the same prompt at position 0 each time).
void print_ab(BenchSteps& steps, bool on_gpu, const std::string& assignments, const cpu::KernelOptions& a,
              const cpu::KernelOptions& b, int rounds, const std::function<double()>& prefill_seconds) {
  std::vector<double> gpu_side[2], whole[2], prefill[2], clocks;
  const bool time_whole = !on_gpu || steps.hybrid;
  for (int i = 0; i < 2 * rounds; ++i) {
    const int side = i % 4 == 1 || i % 4 == 2 ? 1 : 0;
    cpu::set_kernel_options(side == 1 ? b : a);  // between steps: no kernel runs
    if (on_gpu) {
      gpu_side[side].push_back(steps.per_layer_us(steps.time_gpu_side()));
#if SWITCHYARD_HAVE_CUDA
      clocks.push_back(sm_clock(steps));
#endif
    }
    if (time_whole) whole[side].push_back(steps.time_steps() * 1e3);
    prefill[side].push_back(prefill_seconds() * 1e3);
  }
  cpu::set_kernel_options(a);
  std::printf("\n");
  if (on_gpu) print_ab_line(assignments, "GPU side us per layer", gpu_side, 1, false);
  if (time_whole) print_ab_line(assignments, "decode ms/token (the whole step)", whole, 2, false);
  print_ab_line(assignments, "prefill ms", prefill, 1, true);
  if (!clocks.empty())
    std::printf("  SM clock after each timing: %.0f - %.0f MHz\n", *std::min_element(clocks.begin(), clocks.end()),
                *std::max_element(clocks.begin(), clocks.end()));
}

// The CPU experts' calls in the prefill's profile events (step 0, the host's lane) and their time.
struct CpuExpertsTime {
  std::int64_t calls = 0;
  double seconds = 0;
};
CpuExpertsTime cpu_experts_in_prefill(const Tracer& tracer) {
  CpuExpertsTime time;
  for (const Tracer::Event& e : tracer.events())
    if (e.step == 0 && e.lane == 0 && e.region == Region::routed_experts) {
      ++time.calls;
      time.seconds += static_cast<double>(e.end_ns - e.start_ns) / 1e9;
    }
  return time;
}

}  // namespace

void DecodeBenchOptions::add_to(CLI::App& command) {
  model.add_to(command);
  command.add_option("--prompt_tokens", prompt_tokens, "tokens in the timed prefill")
      ->capture_default_str()
      ->transform(integer_range(1, 1 << 20));
  command.add_option("--decode_tokens", decode_tokens, "decode steps timed")
      ->capture_default_str()
      ->transform(integer_range(1, 1 << 20));
  command.add_option("--profile_tokens", profile_tokens, "decode steps timed again with --profile's events (0: none)")
      ->capture_default_str()
      ->transform(integer_range(0, 1 << 20));
  add_cpu_threads_option(command, "--cpu_infer", cpu_infer, "CPU threads for the CPU experts (default: all cores)");
  add_cpu_kernels_option(command, cpu_kernels);
  command.add_option("--use_cuda_graph", use_cuda_graph, "decode steps as CUDA graphs (true|false)")->capture_default_str();
  command.add_option("--seed", seed, "seed of the random prompt")->capture_default_str()->transform(whole_number<unsigned>());
  command.add_option("--leave_out", leave_out,
                     "time the GPU side again without the kernels whose names contain these words (comma-separated; "
                     "one group per use of the option): their cost in the chain, against all kernels, steps one at a "
                     "time; the results are wrong. Leaving out the kernel that hands tokens to the CPU experts ends "
                     "the run with an error");
  cpu_kernel_flags.add_to(command);
  add_ab_option(command, ab_option,
                "the GPU side (where a GPU takes part), the whole decode step (where the CPU does) and the prefill");
  command.add_option("--ab_rounds", ab_rounds, "timings of each side of --ab_option")
      ->capture_default_str()
      ->transform(integer_range(1, 64));
  command.add_flag("--timeline", timeline,
                   "time the GPU side again with every kernel's wait end stamped on the device: each kernel's "
                   "share of a decode step's chain, by kernel and along one layer");
}

int DecodeBenchOptions::run() const {
  if (model.model_path.empty() && model.gguf_path.empty())
    throw InputError("bench decode needs weights: give --model_path DIR or --gguf_path FILE (see `switchyard make-model`)");
  apply_cpu_threads(cpu_infer);
  CheckOptions options = model.to_check_options();
  // The prompt, the timed steps (with and without the CPU experts' work, again for the leave-out
  // groups and the timeline), the profiled ones.
  const std::int64_t needed_context =
      prompt_tokens +
      static_cast<std::int64_t>(3 + (leave_out.empty() ? 0 : leave_out.size() + 1) + (timeline ? 1 : 0) +
                                (ab_option.empty() ? 0 : 4 * ab_rounds)) *
          (decode_tokens + 3) +
      profile_tokens + 4;
  if (options.budget.max_context < needed_context) options.budget.max_context = needed_context;
  options.budget.prefill_chunk = std::max(512, prompt_tokens);  // as the model below takes its prompt
  const CheckResult check = run_check(options);
  for (const Diagnostic& d : check.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
  if (check.diagnostics.has_errors()) return 1;
  const bool on_gpu = std::any_of(check.memory.begin(), check.memory.end(),
                                  [](const DeviceMemory& d) { return d.device.is_cuda() && d.weight_bytes > 0; });
  if ((!leave_out.empty() || timeline) && (!on_gpu || !kWithCuda))
    throw InputError(std::string(timeline ? "--timeline" : "--leave_out") +
                     " times GPU kernels: this placement (or this build) runs nothing on a GPU");
  apply_cpu_kernels(cpu_kernels);
  const cpu::KernelOptions kernel_options = cpu_kernel_flags.options();
  const cpu::KernelOptions ab_kernel_options = with_assignments(kernel_options, ab_option);
  cpu::set_kernel_options(kernel_options);

  const StreamResult stream = stream_triad();
  std::printf("bench decode: %s with %s\n", (model.gguf_path.empty() ? model.model_path : model.gguf_path).c_str(),
              options.profile.c_str());
  std::printf("CPU: STREAM triad %.1f GB/s with %d threads; CPU kernels %s\n", stream.bytes_per_second / 1e9,
              stream.threads, cpu::isa_name(cpu::chosen_isa()));
  const Checkpoint weights = open_model_weights(options.model, check.tree->config());
  Tracer tracer(parse_layer_selection("none", check.tree->num_layers()), false);
  BuildContext context{*check.tree, check.plan, weights, options.budget.max_context, &tracer};
  context.kv_cache_dtype = options.budget.kv_cache_dtype;  // the caches check estimated
  CausalLMOptions lm_options;
  lm_options.use_cuda_graph = use_cuda_graph;
  lm_options.prefill_chunk = options.budget.prefill_chunk;
  lm_options.device_map = options.budget.device_map;
  auto start = Clock::now();
  const std::unique_ptr<CausalLM> built = build_model(context, lm_options, check);
  CausalLM& lm = *built;
  std::printf("built in %.1f s; placement: %s; KV cache %s\n", seconds_since(start), lm.placement_summary().c_str(),
              dtype_name(context.kv_cache().dtype));
  double hbm = 0;
  int gpu_index = -1;  // the first GPU with weights: the one whose ceilings and clock are printed
#if SWITCHYARD_HAVE_CUDA
  for (const DeviceMemory& d : check.memory)
    if (d.device.is_cuda() && d.weight_bytes > 0) {
      gpu_index = options.budget.device_map.physical(d.device.index);  // a CUDA ordinal
      hbm = cuda::measure_copy_bandwidth(gpu_index).bytes_per_second;
      std::printf("GPU: %s device-to-device copy %.0f GB/s (read + write)\n", d.device.str().c_str(), hbm / 1e9);
      break;
    }
#endif

  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(lm.vocab_size() - 1));
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_tokens));
  for (auto& t : prompt) t = id(random);
  lm.forward(std::span(prompt).first(std::min<std::size_t>(prompt.size(), 16)), 0);  // warm-up: cuBLAS, pages
  start = Clock::now();
  std::vector<float> logits = lm.forward(prompt, 0);
  const double prefill_seconds = seconds_since(start);
  // Again over the same positions: the first prefill at this length also pays one-time costs (memory
  // for its buffers, GPU kernels loaded at their first use); the second is what later prompts see.
  // Its profile events give the CPU experts' share of it.
  tracer.set_profiling(true);
  tracer.begin_step(0);
  start = Clock::now();
  logits = lm.forward(prompt, 0);
  const double prefill_again_seconds = seconds_since(start);
  tracer.set_profiling(false);
  const CpuExpertsTime experts_in_prefill = cpu_experts_in_prefill(tracer);

  const auto layers = static_cast<double>(check.tree->num_layers());
  const ExpertTraffic traffic = expert_traffic(check);
  BenchSteps steps{lm, cpu::argmax(logits.data(), lm.vocab_size()), prompt_tokens, decode_tokens,
                   /*hybrid=*/hbm > 0 && traffic.cpu_bytes > 0, layers, gpu_index};
  const double decode_seconds = steps.time_steps();

  double gpu_weight_bytes = 0;
  for (const DeviceMemory& d : check.memory)
    if (d.device.is_cuda()) gpu_weight_bytes += static_cast<double>(d.weight_bytes);
  const double gpu_bytes = gpu_weight_bytes - traffic.gpu_resident_bytes + traffic.gpu_bytes;
  const double cpu_roofline = traffic.cpu_bytes / stream.bytes_per_second;
  const double gpu_roofline = hbm > 0 ? gpu_bytes / hbm : 0;

  std::printf("\nprefill: %d tokens in %.3f s: %.1f tokens/s (the first prompt of this length); again %.3f s: %.1f "
              "tokens/s\n",
              prompt_tokens, prefill_seconds, prompt_tokens / prefill_seconds, prefill_again_seconds,
              prompt_tokens / prefill_again_seconds);
  if (experts_in_prefill.calls > 0) {
    // The CPU experts' calls inside the second prefill. The rest of its time is spent while no CPU
    // expert runs: attention and the hand-offs (a GPU's shared experts overlap the routed).
    const double experts = experts_in_prefill.seconds;
    std::printf("  of it, the CPU experts: %lld layers' calls, %.1f ms (%.0f%%)\n",
                static_cast<long long>(experts_in_prefill.calls), experts * 1e3, 100 * experts / prefill_again_seconds);
  }
  std::printf("decode:  %.3f ms/token, %.2f tokens/s (%d steps%s)\n", decode_seconds * 1e3, 1.0 / decode_seconds,
              decode_tokens, lm.graph_device() ? ", one CUDA graph each" : "");
  std::printf("ceilings per token:\n");
  std::printf("  CPU: routed experts %s / STREAM %.1f GB/s = %.3f ms%s\n",
              format_bytes(static_cast<std::uint64_t>(traffic.cpu_bytes)).c_str(), stream.bytes_per_second / 1e9,
              cpu_roofline * 1e3,
              cpu_roofline > 0 ? (" -> decode at " + std::to_string(decode_seconds / cpu_roofline).substr(0, 4) +
                                  "x the roofline (target <= 1.3x)")
                                     .c_str()
                               : "");
  if (hbm > 0)
    std::printf("  GPU: weights read %s / HBM %.0f GB/s = %.3f ms%s\n",
                format_bytes(static_cast<std::uint64_t>(gpu_bytes)).c_str(), hbm / 1e9, gpu_roofline * 1e3,
                cpu_roofline > 0 ? "" : (" -> decode at " + std::to_string(decode_seconds / gpu_roofline).substr(0, 5) + "x").c_str());

  // The GPU side alone, only where a GPU takes part (hbm was measured): a run on the CPU alone has
  // no GPU side.
  if (hbm <= 0)
    std::printf("time per layer: %.1f us (the whole step / %d layers, all on the CPU)\n",
                steps.per_layer_us(decode_seconds), static_cast<int>(layers));
  double gpu_side = decode_seconds;
  if (steps.hybrid) {
    gpu_side = steps.time_gpu_side();
    std::printf("GPU side alone (CPU experts' work skipped, hand-offs kept): %.3f ms/token, %.1f us per layer "
                "(the whole step over the layers, the head included)\n",
                gpu_side * 1e3, steps.per_layer_us(gpu_side));
    // The rest of a step is the CPU experts' (the GPU waits for them): the bandwidth they reach.
    const double cpu_side = decode_seconds - gpu_side;
    if (cpu_side > 0 && traffic.cpu_bytes > 0)
      std::printf("CPU experts (the step less the GPU side): %.3f ms/token, %.1f GB/s of expert weights, %.2fx "
                  "STREAM\n",
                  cpu_side * 1e3, traffic.cpu_bytes / cpu_side / 1e9,
                  traffic.cpu_bytes / cpu_side / stream.bytes_per_second);
  } else if (hbm > 0) {
    std::printf("GPU time per layer: %.1f us (the whole step / %d layers)\n", steps.per_layer_us(decode_seconds),
                static_cast<int>(layers));
  }
#if SWITCHYARD_HAVE_CUDA
  if (gpu_index >= 0) std::printf("SM clock after those steps: %.0f MHz\n", sm_clock(steps));
  // All-GPU: timed again here, at context lengths near those of the timeline.
  if (!steps.hybrid && timeline) gpu_side = steps.time_gpu_side();
  print_leave_out(steps, leave_out);
#endif
  if (!ab_option.empty())
    print_ab(steps, hbm > 0, ab_option, kernel_options, ab_kernel_options, ab_rounds, [&] {
      const auto begin = Clock::now();
      lm.forward(prompt, 0);
      return seconds_since(begin);
    });
#if SWITCHYARD_HAVE_CUDA
  if (timeline) print_timeline(steps, gpu_side);
#endif

  if (profile_tokens > 0) {
    tracer.set_profiling(true);
    for (int i = 0; i < profile_tokens; ++i) {
      tracer.begin_step(i + 1);
      const Tracer::Scope scope(&tracer, Region::decode_step);
      steps.next = lm.forward_greedy(std::span(&steps.next, 1), steps.position++);
    }
    std::printf("\n%s", tracer.profile_table().c_str());
    // The GPU side's target is per decoder layer: the step less the head (its GEMV over the
    // vocabulary and the choice), as the profile's CUDA events timed it.
    double head = 0;
    for (const Tracer::Event& e : tracer.events())
      if (e.step > 0 && e.lane != 0 && e.region == Region::lm_head)
        head += static_cast<double>(e.end_ns - e.start_ns) / 1e9;
    head /= profile_tokens;
    if (hbm > 0 && head > 0 && head < gpu_side)
      std::printf("GPU side less the head (lm_head %.3f ms, the profile's mean): %.1f us per decoder layer "
                  "(target <= 50)\n",
                  head * 1e3, steps.per_layer_us(gpu_side - head));
  }
  return 0;
}

}  // namespace switchyard::cli
