// The residual stream's deferred additions (operators/model/residual_stream.h, pending_delta.h), on the
// CPU: what a block defers is what the next norm takes, once; a new pass drops it; a part on the
// host is refused where no GPU can wait for it. The GPU side (a host part added by the next norm's
// launch, or when the stream moves to another GPU) is covered by the GPU model tests.
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "operators/model/residual_stream.h"

namespace sy = switchyard;

TEST_CASE("residual stream: a deferred delta is taken once, by the next taker, and a new pass drops it") {
  sy::ResidualStream stream(nullptr, 4, 8);
  stream.start(sy::Device::cpu(), 3);
  CHECK(stream.take_delta().empty());  // nothing deferred yet
  float* delta = stream.delta(sy::Device::cpu());
  stream.defer_add(sy::PendingDelta{delta});
  const sy::PendingDelta taken = stream.take_delta();
  CHECK(taken.device == delta);
  CHECK(taken.host == nullptr);
  CHECK(stream.take_delta().empty());  // taken: no longer pending

  stream.defer_add(sy::PendingDelta{delta});
  stream.start(sy::Device::cpu(), 1);  // a new pass starts from the stream alone
  CHECK(stream.take_delta().empty());
}

TEST_CASE("residual stream: a delta's part on the host is refused on the CPU and for more than one token") {
  sy::ResidualStream stream(nullptr, 4, 8);
  std::vector<float> host(8);
  std::uint32_t flag = 0;
  const sy::PendingDelta with_host{nullptr, host.data(), &flag, 3};
  stream.start(sy::Device::cpu(), 1);
  CHECK_THROWS_AS(stream.defer_add(with_host), std::logic_error);
  CHECK(stream.take_delta().empty());  // the refused delta is not pending
}

TEST_CASE("pending delta: from_row moves both parts by whole rows") {
  std::vector<float> device(24), host(24);
  std::uint32_t flag = 0;
  const sy::PendingDelta both{device.data(), host.data(), &flag, 5};
  const sy::PendingDelta later = both.from_row(2, 8);
  CHECK(later.device == device.data() + 16);
  CHECK(later.host == host.data() + 16);
  CHECK(later.flag == &flag);
  CHECK(later.layer == 5);
  const sy::PendingDelta device_only = sy::PendingDelta{device.data()}.from_row(1, 8);
  CHECK(device_only.device == device.data() + 8);
  CHECK(device_only.host == nullptr);
  CHECK(sy::PendingDelta{}.from_row(3, 8).empty());
}
