#include "core/device.h"

#include <charconv>

#include "core/text.h"

namespace switchyard {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

std::optional<Device> parse_device(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const std::string lower = to_lower(text);
  if (lower == "cpu") return Device::cpu();
  if (lower == "cuda") return Device::cuda(0);
  if (!starts_with(lower, "cuda:")) return std::nullopt;
  const std::string_view digits = std::string_view(lower).substr(5);
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  int ordinal = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
  if (ec != std::errc() || end != digits.data() + digits.size() || ordinal < 0 || ordinal >= kMaxCudaDevices) return std::nullopt;
  return Device::cuda(ordinal);
}

}  // namespace switchyard
