#pragma once
// Devices are "cpu" and "cuda:N". ktransformers profiles also write plain "cuda", which means
// cuda:0 (the current device of a fresh process).
#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int ordinal) { return {Kind::cuda, ordinal}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  auto operator<=>(const Device&) const = default;
};

// CUDA ordinals are 0 to kMaxCudaDevices - 1: a bound on plans and flags, far above any machine.
constexpr int kMaxCudaDevices = 1024;

// Accepts "cpu", "cuda", "cuda:N" (N < kMaxCudaDevices), case-insensitively with surrounding spaces.
std::optional<Device> parse_device(std::string_view text);

}  // namespace switchyard
