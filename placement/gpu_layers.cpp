#include "placement/gpu_layers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "core/device.h"
#include "core/error.h"
#include "core/text.h"

namespace switchyard {
namespace {

std::string share_text(double share) {
  std::string text = std::to_string(share);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

std::string GpuLayerFlags::text() const {
  std::vector<std::string> parts;
  if (n_gpu_layers) parts.push_back("-ngl " + std::to_string(*n_gpu_layers));
  if (!tensor_split.empty()) {
    std::vector<std::string> shares;
    for (double s : tensor_split) shares.push_back(share_text(s));
    parts.push_back("-ts " + join(shares, ","));
  }
  if (main_gpu) parts.push_back("--main-gpu " + std::to_string(*main_gpu));
  return join(parts, " ");
}

int gpus_named_by(const GpuLayerFlags& flags) {
  if (!flags.tensor_split.empty()) return static_cast<int>(flags.tensor_split.size());
  if (flags.main_gpu && *flags.main_gpu >= 0) return *flags.main_gpu + 1;
  return 1;
}

std::vector<double> parse_tensor_split(const std::string& text) {
  std::vector<double> shares;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find_first_of(",/", start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    double value = 0;
    const char* last = item.data() + item.size();
    const auto [stop, error] = std::from_chars(item.data(), last, value);
    if (item.empty() || error != std::errc() || stop != last || !std::isfinite(value) || value < 0)
      throw InputError("--tensor-split " + quoted_excerpt(text) + ": " + quoted_excerpt(item) +
                       " is not a share (give numbers >= 0 per GPU, e.g. -ts 3,1)");
    shares.push_back(value);
    if (shares.size() > static_cast<std::size_t>(kMaxCudaDevices))
      throw InputError("--tensor-split " + quoted_excerpt(text) + " lists more than " + std::to_string(kMaxCudaDevices) +
                       " shares, one per GPU; a plan has at most " + std::to_string(kMaxCudaDevices) + " GPUs");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return shares;
}

std::vector<Device> assign_layer_devices(int layers, int gpus, const GpuLayerFlags& flags,
                                         const std::vector<std::uint64_t>& budgets_bytes) {
  if (gpus < 1) throw InputError("-ngl, -ts and --main-gpu place layers on GPUs, but this plan has none (--gpus 0)");
  if (flags.n_gpu_layers && *flags.n_gpu_layers < 0)
    throw InputError("-ngl " + std::to_string(*flags.n_gpu_layers) + ": give 0 (every layer on the CPU) or more");
  if (flags.main_gpu && (*flags.main_gpu < 0 || *flags.main_gpu >= gpus))
    throw InputError("--main-gpu " + std::to_string(*flags.main_gpu) + ": the GPUs are 0 to " + std::to_string(gpus - 1));
  if (flags.main_gpu && !flags.tensor_split.empty())
    throw InputError("--main-gpu picks the one GPU that holds the layers, and --tensor-split divides them: give one of them");
  if (static_cast<int>(flags.tensor_split.size()) > gpus)
    throw InputError("--tensor-split lists " + std::to_string(flags.tensor_split.size()) + " shares for " +
                     std::to_string(gpus) + " GPUs");

  const int on_gpus = std::min(layers, flags.n_gpu_layers.value_or(layers));
  const int first_gpu_layer = layers - on_gpus;
  std::vector<Device> devices(static_cast<std::size_t>(layers), Device::cpu());
  std::vector<double> shares = flags.tensor_split;
  if (shares.empty() && !flags.main_gpu && gpus > 1) {
    for (int g = 0; g < gpus; ++g)
      shares.push_back(budgets_bytes.empty() ? 1.0
                                             : static_cast<double>(budgets_bytes[budgets_bytes.size() == 1 ? 0 : static_cast<std::size_t>(g)]));
  }
  if (shares.empty()) {
    for (int l = first_gpu_layer; l < layers; ++l) devices[static_cast<std::size_t>(l)] = Device::cuda(flags.main_gpu.value_or(0));
    return devices;
  }
  const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
  if (!(total > 0)) throw InputError("--tensor-split " + flags.text() + ": the shares sum to 0; give at least one GPU a share");
  // llama.cpp's division: cumulative shares as floats, and the output layer counted among the
  // offloaded ones when it is offloaded (N past the decoder layers).
  std::vector<float> cumulative(shares.size());
  double sum = 0;
  for (std::size_t g = 0; g < shares.size(); ++g) cumulative[g] = static_cast<float>((sum += shares[g]) / total);
  const bool output_offloaded = !flags.n_gpu_layers || *flags.n_gpu_layers > layers;
  const int counted = on_gpus + (output_offloaded ? 1 : 0);
  for (int l = first_gpu_layer; l < layers; ++l) {
    const float position = static_cast<float>(l - first_gpu_layer) / static_cast<float>(counted);
    const auto g = std::upper_bound(cumulative.begin(), cumulative.end(), position) - cumulative.begin();
    devices[static_cast<std::size_t>(l)] = Device::cuda(static_cast<int>(std::min<std::ptrdiff_t>(g, static_cast<std::ptrdiff_t>(shares.size()) - 1)));
  }
  return devices;
}

}  // namespace switchyard
