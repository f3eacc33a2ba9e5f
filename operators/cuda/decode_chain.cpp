#include "operators/cuda/decode_chain.h"

#include <atomic>
#include <string>

#include "operators/cuda/kernels/host_poll.h"

namespace switchyard {

DecodeChain::DecodeChain(const Tensor* host_embedding)
    : slots_(2 * sizeof(std::uint64_t), "the decode steps' tokens"),
      slots_device_(slots_.device_view_as<std::uint64_t>()) {
  // The graph gathers the step's row itself (no host work between steps), from host memory as the
  // placement says, read over the bus: the checkpoint's pages, or a page-locked copy.
  if (host_embedding != nullptr)
    embedding_ = std::make_unique<cuda::HostTable>(host_embedding->data(), host_embedding->bytes(),
                                                   "the token embedding table (for decode graphs)",
                                                   host_embedding->in_read_only_pages());
}

void DecodeChain::clear_slots() {
  for (int i = 0; i < 2; ++i) slots_.as<std::uint64_t>()[i] = ~std::uint64_t{0};
}

std::int32_t DecodeChain::wait_for_token(DeviceRuntimes& runtimes, GpuRuntime& gpu, std::int64_t position,
                                         std::size_t later_jobs) {
  std::atomic_ref<std::uint64_t> slot(slots_.as<std::uint64_t>()[position % 2]);
  // Asleep: the next step is queued already, so a late look costs no GPU time (cuda::PollPause).
  // First until this step's CPU jobs are done (the next step's are queued behind them), then
  // between looks at the slot.
  runtimes.wait_for_jobs(later_jobs);
  std::int32_t token = 0;
  cuda::poll_until(
      [&] {
        const std::uint64_t value = slot.load(std::memory_order_acquire);
        token = static_cast<std::int32_t>(value & 0xffffffffu);
        return static_cast<std::int64_t>(value >> 32) == position;
      },
      gpu.stream(), cuda::PollPause::sleep,
      [&] {
        return "the GPU finished the decode step before position " + std::to_string(position) +
               " without handing over its token";
      });
  return token;
}

}  // namespace switchyard
