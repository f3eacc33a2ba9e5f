#pragma once
// --fit (check, run, split), as llama.cpp's --fit and llama-fit-params do it: given the GPUs'
// budgets (--gpu_memory, or what the GPUs present have free), keep attention, shared experts,
// dense layers and the head where the profile (or, without one, the layer flags and the default
// device) puts them, and the routed experts of as many MoE layers on the GPUs as still fit with
// `margin_bytes` to spare on each; the others' go to the CPU. Each GPU is filled by its own
// budget: of the MoE layers it runs (its MoE blocks, whether the rules put their experts on it or
// on the CPU), those of its first n_g keep their experts on the CPU (as --n-cpu-moe keeps the
// first layers'), the rest have them on the GPU, n_g the smallest that fits it; one layer fewer
// would not (a test proves it maximal). With one GPU that is --n-cpu-moe N. So a profile that
// sends every expert to the CPU gets those of its last layers back onto a GPU with room.
#include <cstdint>
#include <string>
#include <vector>

namespace switchyard {

struct FitOptions {
  bool enabled = false;
  std::uint64_t margin_bytes = std::uint64_t{1} << 30;  // left free on every GPU
};

struct FitOutcome {
  int moe_layers = 0;            // of the model
  int cpu_layers = 0;            // MoE layers run by a GPU whose routed experts the fit leaves on the CPU
  int gpu_layers = 0;            // MoE layers whose routed experts are on a GPU
  std::vector<int> layers;       // the cpu_layers' decoder layer numbers, ascending
  bool first_layers = false;     // they are the first cpu_layers MoE layers (--n-cpu-moe cpu_layers)
  std::uint64_t margin_bytes = 0;
  std::string override_tensor;   // the same as llama.cpp's -ot value ("" when none is on the CPU)
  std::vector<int> brought_to_gpu;  // layers whose experts the rules put on the CPU and the fit on a GPU
};

// "fit: the routed experts of the first 20 of 58 MoE layers on the CPU (--n-cpu-moe 20; llama.cpp:
// -ot "blk\.(3|...)\.ffn_(up|down|gate)_exps=CPU"), 1.0 GiB left free on every GPU"; with
// several GPUs "... of 20 of 58 MoE layers (layers 3-12, 33-42) on the CPU ...".
std::string describe_fit(const FitOutcome& fit);

struct CheckOptions;
struct CheckResult;
// run_check with --fit: the check of the smallest N that fits, with its FitOutcome. Every GPU over
// its budget less the margin even with every routed expert on the CPU is an error (fit-impossible)
// that says by how much, on that check. Throws InputError without --gpu_memory, or with
// --cpu-moe / --n-cpu-moe (the fit chooses N itself).
CheckResult run_fit_check(const CheckOptions& options);

}  // namespace switchyard
