#pragma once
// --fit (check and run), as llama.cpp's --fit and llama-fit-params do it: given the GPUs' budgets
// (--gpu_memory), keep attention, shared experts, dense layers and the head where the profile (or,
// without one, the default device) puts them, and the routed experts of as many MoE layers on the
// GPUs as still fit with `margin_bytes` to spare on each; the others' go to the CPU. The experts
// that move are those of the first N MoE layers, as --n-cpu-moe N moves them, and N is the
// smallest that fits: one layer fewer would not (a test proves it maximal).
#include <cstdint>
#include <string>

namespace switchyard {

struct FitOptions {
  bool enabled = false;
  std::uint64_t margin_bytes = std::uint64_t{1} << 30;  // left free on every GPU
};

struct FitOutcome {
  int moe_layers = 0;  // of the model
  int cpu_layers = 0;  // N: the first N MoE layers' routed experts on the CPU
  std::uint64_t margin_bytes = 0;
  std::string override_tensor;  // the same as llama.cpp's -ot value ("" when N is 0)
};

// "fit: the routed experts of the first 20 of 58 MoE layers on the CPU (--n-cpu-moe 20; llama.cpp:
// -ot "blk\.(3|...)\.ffn_(up|down|gate)_exps=CPU"), 1.0 GiB left free on every GPU"
std::string describe_fit(const FitOutcome& fit);

struct CheckOptions;
struct CheckResult;
// run_check with --fit: the check of the smallest N that fits, with its FitOutcome. Every GPU over
// its budget less the margin even with every routed expert on the CPU is an error (fit-impossible)
// that says by how much, on that check. Throws InputError without --gpu_memory, or with
// --cpu-moe / --n-cpu-moe (the fit chooses N itself).
CheckResult run_fit_check(const CheckOptions& options);

}  // namespace switchyard
