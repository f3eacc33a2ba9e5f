// Byte sizes, devices and the small text helpers behind did-you-mean and layer-range reports.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/device.h"
#include "core/text.h"
#include "core/units.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using sy::core_testing::SeededRng;

namespace {

constexpr std::uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;

std::string random_word(SeededRng& rng, std::size_t max_length) {
  std::string word(rng.below(max_length + 1), ' ');
  for (char& c : word) c = static_cast<char>('a' + rng.below(4));  // small alphabet: many near-misses
  return word;
}

// "0-2,5,7-8" -> {0,1,2,5,7,8}, for checking format_ranges without restating its algorithm.
std::vector<int> expand_ranges(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(start, end - start);
    const std::size_t dash = part.find('-');
    const int first = std::stoi(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int v = first; v <= last; ++v) out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("core: parse_byte_size reads decimal and binary units") {
  CHECK(sy::parse_byte_size("24GiB") == 24 * kGiB);
  CHECK(sy::parse_byte_size("80GB") == 80'000'000'000ULL);
  CHECK(sy::parse_byte_size("1.5TiB") == 3 * kTiB / 2);
  CHECK(sy::parse_byte_size("512 MiB") == 512 * kMiB);
  CHECK(sy::parse_byte_size("100") == 100);
  CHECK(sy::parse_byte_size("100B") == 100);
  CHECK(sy::parse_byte_size(" 2gib ") == 2 * kGiB);
  CHECK(sy::parse_byte_size("0.5KiB") == 512);
  CHECK(sy::parse_byte_size("3k") == 3000);
  // Near the top of the range: larger than a long long holds.
  CHECK(sy::parse_byte_size("16000000TB") == 16'000'000'000'000'000'000ULL);

  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t n = static_cast<std::uint64_t>(rng.between(0, 1 << 20));
    INFO(n);
    CHECK(sy::parse_byte_size(std::to_string(n) + "MiB") == n * kMiB);
    CHECK(sy::parse_byte_size(std::to_string(n) + "GB") == n * 1'000'000'000ULL);
  }
}

TEST_CASE("core: parse_byte_size rejects what is not a size") {
  for (const char* bad : {"", "   ", "GiB", "-1GiB", "24XB", "1e400GiB", "1e3", "1.2.3GiB", "24 GiB free", "24  GiB",
                          "0x10", "20000000TB", "24GiBs"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(sy::parse_byte_size(bad).has_value());
  }
}

TEST_CASE("core: format_bytes prints binary units with one decimal") {
  CHECK(sy::format_bytes(0) == "0 B");
  CHECK(sy::format_bytes(1023) == "1023 B");
  CHECK(sy::format_bytes(1024) == "1.0 KiB");
  CHECK(sy::format_bytes(1536 * kMiB) == "1.5 GiB");
  CHECK(sy::format_bytes(24 * kGiB) == "24.0 GiB");
  CHECK(sy::format_bytes(3 * kTiB) == "3.0 TiB");

  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int i = 0; i < 200; ++i) {
    // One decimal of a unit the value is at least 1 of: reading it back is off by at most 5%.
    // (Below 1 PiB: parse_byte_size stops at TiB.)
    const std::uint64_t bytes = static_cast<std::uint64_t>(rng.between(1024, (1LL << 50) - 1));
    const std::string text = sy::format_bytes(bytes);
    INFO(bytes << " -> " << text);
    const auto back = sy::parse_byte_size(text);
    REQUIRE(back.has_value());
    CHECK(std::abs(static_cast<double>(*back) - static_cast<double>(bytes)) <= 0.05 * static_cast<double>(bytes));
  }
}

TEST_CASE("core: parse_device accepts cpu, cuda and cuda:N") {
  CHECK(sy::parse_device("cpu") == sy::Device::cpu());
  CHECK(sy::parse_device("CPU") == sy::Device::cpu());
  CHECK(sy::parse_device("cuda") == sy::Device::cuda(0));
  CHECK(sy::parse_device("cuda:3") == sy::Device::cuda(3));
  CHECK(sy::parse_device(" CUDA:1 ") == sy::Device::cuda(1));
  CHECK(sy::parse_device("cuda:1023") == sy::Device::cuda(1023));
  for (const char* bad : {"cuda:", "cuda:-1", "gpu0", "cuda:99999", "cuda:1024", "cuda:1x", "cuda:+1", "cuda :1", "",
                          "cpu:0", "cuda:0:1"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(sy::parse_device(bad).has_value());
  }
  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int i = 0; i < 50; ++i) {
    const sy::Device device = sy::Device::cuda(static_cast<int>(rng.between(0, 1023)));
    CHECK(sy::parse_device(device.str()) == device);
  }
  CHECK(sy::Device::cpu().str() == "cpu");
  CHECK(sy::Device::cuda(7).str() == "cuda:7");
}

TEST_CASE("core: edit_distance is a case-insensitive Levenshtein distance") {
  CHECK(sy::edit_distance("kitten", "sitting") == 3);
  CHECK(sy::edit_distance("", "abc") == 3);
  CHECK(sy::edit_distance("abc", "") == 3);
  CHECK(sy::edit_distance("Linear", "linear") == 0);
  CHECK(sy::edit_distance("experts", "expert") == 1);
  // UTF-8 bytes (negative as plain char) compare as bytes.
  CHECK(sy::edit_distance("\xc3\xa9", "\xc3\xa9") == 0);
  CHECK(sy::edit_distance("\xc3\xa9", "e") == 2);

  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int i = 0; i < 300; ++i) {
    const std::string a = random_word(rng, 8), b = random_word(rng, 8), c = random_word(rng, 8);
    INFO("'" << a << "' '" << b << "' '" << c << "'");
    const std::size_t ab = sy::edit_distance(a, b);
    CHECK(sy::edit_distance(a, a) == 0);
    CHECK(ab == sy::edit_distance(b, a));
    CHECK(ab <= std::max(a.size(), b.size()));
    CHECK(ab >= (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()));
    CHECK(sy::edit_distance(a, c) <= ab + sy::edit_distance(b, c));
  }
}

TEST_CASE("core: closest_match suggests plausible typos only") {
  const std::vector<std::string> classes = {"Linear", "Embedding", "DeepseekV3MoE", "DeepseekV2MoE"};
  CHECK(sy::closest_match("Lineer", classes) == "Linear");
  CHECK(sy::closest_match("DeepseekV3Moe", classes) == "DeepseekV3MoE");
  CHECK(sy::closest_match("Embeding", classes) == "Embedding");
  CHECK(sy::closest_match("RotaryEmbedding", classes).empty());
  CHECK(sy::closest_match("Linear", std::vector<std::string>{}).empty());
  CHECK(sy::did_you_mean("Lineer", classes) == " (did you mean 'Linear'?)");
  CHECK(sy::did_you_mean("Transformer", classes).empty());
}

TEST_CASE("core: format_ranges compacts sorted layer numbers") {
  CHECK(sy::format_ranges(std::vector<int>{0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
  CHECK(sy::format_ranges(std::vector<int>{}).empty());
  CHECK(sy::format_ranges(std::vector<int>{3}) == "3");
  CHECK(sy::format_ranges(std::vector<int>{3, 5}) == "3,5");

  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int i = 0; i < 200; ++i) {
    std::set<int> unique;
    const std::size_t count = rng.below(40);
    while (unique.size() < count) unique.insert(static_cast<int>(rng.between(0, 60)));
    const std::vector<int> values(unique.begin(), unique.end());
    const std::string text = sy::format_ranges(values);
    INFO(text);
    CHECK(expand_ranges(text) == values);
    // No run of consecutive numbers is split: each part starts after a gap.
    const std::size_t parts = text.empty() ? 0 : static_cast<std::size_t>(std::count(text.begin(), text.end(), ',')) + 1;
    std::size_t runs = 0;
    for (std::size_t k = 0; k < values.size(); ++k) runs += (k == 0 || values[k] != values[k - 1] + 1);
    CHECK(parts == runs);
  }
}
