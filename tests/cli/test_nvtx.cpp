// NVTX ranges of `switchyard run --nvtx_layers`, recorded by our injection library
// (tests/nvtx_recorder), the way nsys would see them: named per layer, only for the selected
// layers, and correctly nested. Runs without a GPU.
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "tests/core_test_support.h"
#include "tests/test_support.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#endif

using namespace switchyard::testing;

#ifdef SWITCHYARD_NVTX_RECORDER

namespace {

struct Range {
  std::string name;
  int depth;
  std::string parent;
  int thread;  // 0: the thread that pushed first (the main thread)
};

std::vector<Range> record(const std::string& arguments) {
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("switchyard-nvtx-" + std::to_string(std::random_device{}()) + ".log")).string();
  const auto run = run_switchyard_with_env("NVTX_INJECTION64_PATH=" + std::string(SWITCHYARD_NVTX_RECORDER) +
                                               " SWITCHYARD_NVTX_LOG=" + log,
                                           arguments);
  REQUIRE(run.exit_code == 0);
  std::ifstream in(log);
  std::vector<Range> ranges;
  std::map<int, std::vector<std::string>> stacks;  // per thread, as NVTX nests ranges
  std::string kind;
  int thread = 0, depth = 0;
  while (in >> kind >> thread >> depth) {
    std::vector<std::string>& stack = stacks[thread];
    if (kind == "push") {
      std::string name;
      in >> name;
      CHECK(depth == static_cast<int>(stack.size()) + 1);
      ranges.push_back(Range{name, depth, stack.empty() ? "" : stack.back(), thread});
      stack.push_back(name);
    } else {
      REQUIRE(kind == "pop");
      CHECK(depth == static_cast<int>(stack.size()));
      stack.pop_back();
    }
  }
  for (const auto& [t, stack] : stacks) CHECK(stack.empty());  // every push was popped
  std::filesystem::remove(log);
  return ranges;
}

}  // namespace

TEST_CASE("nvtx: per-layer ranges for the selected layers, nested in prefill and decode steps") {
  // The embedded tiny DeepSeek-V3: layer 0 dense, layers 1-3 MoE.
  const auto ranges = record("run --max_new_tokens 3 --nvtx_layers 0,2");
  REQUIRE_FALSE(ranges.empty());
  int prefill = 0, decode = 0;
  for (const Range& r : ranges) {
    INFO(r.name << " at depth " << r.depth << " in " << r.parent);
    if (r.name == "prefill" || r.name == "decode_step") {
      ++(r.name == "prefill" ? prefill : decode);
      CHECK(r.depth == 1);
    }
    // Only layers 0 and 2 have ranges.
    CHECK(r.name.find("_1") == std::string::npos);
    CHECK(r.name.find("_3") == std::string::npos);
    if (r.name.rfind("self_attention_", 0) == 0 || r.name.rfind("moe_gate_", 0) == 0 ||
        r.name.rfind("routed_experts_", 0) == 0 || r.name.rfind("shared_experts_", 0) == 0 ||
        r.name.rfind("dense_mlp_", 0) == 0) {
      CHECK(r.depth == 2);
      CHECK((r.parent == "prefill" || r.parent == "decode_step"));
    }
  }
  CHECK(prefill == 1);
  CHECK(decode == 2);  // the first new token comes from prefill
  auto count = [&](const std::string& name) {
    return std::count_if(ranges.begin(), ranges.end(), [&](const Range& r) { return r.name == name; });
  };
  CHECK(count("self_attention_0") == 3);
  CHECK(count("dense_mlp_0") == 3);
  CHECK(count("self_attention_2") == 3);
  CHECK(count("moe_gate_2") == 3);
  CHECK(count("routed_experts_2") == 3);
  CHECK(count("shared_experts_2") == 3);
  CHECK(count("moe_gate_0") == 0);
}

#if SWITCHYARD_HAVE_CUDA
TEST_CASE("nvtx: the hybrid GPU + CPU-experts layer names its hand-off") {
  if (switchyard::cuda::device_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  // The shipped DeepSeek-V3 profile (experts on the CPU in prefill and decode), and the same with
  // the experts on the GPU in prefill.
  const std::string shipped = source_path("optimize_rules/DeepSeek-V3-Chat.yaml");
  std::stringstream text;
  text << std::ifstream(shipped).rdbuf();
  std::string gpu_prefill = text.str();
  const std::string cpu_prefill_kwargs = "prefill_device: \"cpu\"\n      prefill_op: \"KExpertsCPU\"";
  const std::size_t at = gpu_prefill.find(cpu_prefill_kwargs);
  REQUIRE(at != std::string::npos);
  gpu_prefill.replace(at, cpu_prefill_kwargs.size(), "prefill_device: \"cuda:0\"\n      prefill_op: \"KExpertsTorch\"");
  const switchyard::core_testing::TempDir dir;
  const std::string gpu_prefill_path = (dir / "gpu-prefill.yaml").string();
  std::ofstream(gpu_prefill_path) << gpu_prefill;
  for (const bool experts_prefill_on_gpu : {false, true})
    for (const bool graph : {false, true}) {
      INFO("use_cuda_graph " << graph << ", experts on the GPU in prefill " << experts_prefill_on_gpu);
      const auto ranges = record("run --max_new_tokens 4 --nvtx_layers 2 --optimize_config_path " +
                                 (experts_prefill_on_gpu ? gpu_prefill_path : shipped) + " --use_cuda_graph " +
                                 (graph ? "true" : "false"));
      auto count = [&](const std::string& name) {
        return std::count_if(ranges.begin(), ranges.end(), [&](const Range& r) { return r.name == name; });
      };
      for (const Range& r : ranges) {
        INFO(r.name << " at depth " << r.depth << " in " << r.parent << " on thread " << r.thread);
        if (r.name.find("_2") == std::string::npos) continue;
        if (r.thread == 0) {
          CHECK(r.depth == 2);
          CHECK((r.parent == "prefill" || r.parent == "decode_step"));
        } else {  // the CPU-experts worker: its own top-level ranges
          CHECK(r.name == "routed_experts_2");
          CHECK(r.depth == 1);
        }
      }
      // Eager: every step emits its ranges; with graphs the three decode steps are one capture
      // (its ranges are the graph's) and two replays, whose only per-layer host work is the
      // CPU experts. The prefill hands its tokens to the CPU too unless its experts are on the GPU.
      const long launched = graph ? 2 : 4;  // prefill + captured or eager decode steps
      const long handed = experts_prefill_on_gpu ? launched - 1 : launched;
      CHECK(count("self_attention_2") == launched);
      CHECK(count("moe_gate_2") == launched);
      CHECK(count("shared_experts_2") == launched);
      CHECK(count("cpuinfer_submit_2") == handed);
      CHECK(count("cpuinfer_sync_2") == handed);
      CHECK(count("routed_experts_2") == 4);  // the prefill (GPU launches or CPU), then CPU every decode step
    }
}
#endif

TEST_CASE("nvtx: no ranges at all when off") {
  CHECK(record("run --max_new_tokens 3").empty());
  CHECK(record("run --max_new_tokens 3 --nvtx_layers none").empty());
}

TEST_CASE("nvtx: a bad layer selection is a usage error") {
  CHECK(run_switchyard("run --nvtx_layers 7").exit_code == 2);  // the embedded model has 4 layers
  CHECK(run_switchyard("run --nvtx_layers 1-x").exit_code == 2);
}

#endif
