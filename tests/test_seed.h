#pragma once
// The seed of a test's random inputs: fresh on every run, so that the inputs keep changing, or
// SWITCHYARD_TEST_SEED to replay a draw that failed (tests print the seed they used).
#include <cstdint>
#include <cstdlib>
#include <random>

namespace switchyard::testing {

inline std::uint32_t test_seed() {
  if (const char* fixed = std::getenv("SWITCHYARD_TEST_SEED"))
    return static_cast<std::uint32_t>(std::strtoul(fixed, nullptr, 10));
  return std::random_device{}();
}

}  // namespace switchyard::testing
