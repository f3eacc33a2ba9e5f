// The one strict UTF-8 reading (core/text.h's decode_utf8 and valid_utf8) that every path into
// PCRE2 goes through, against a plain reference written from the Unicode Standard's table of
// well-formed byte sequences (chapter 3, table 3-7), on random bytes near UTF-8.
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/text.h"
#include "tests/core_test_support.h"
#include "text/byte_level.h"

namespace sy = switchyard;
using sy::core_testing::SeededRng;

namespace {

// The length of the well-formed sequence at `at`, or 0: each row of table 3-7 as byte ranges.
std::size_t table_sequence_length(const std::string& s, std::size_t at) {
  struct Row {
    unsigned char low[4], high[4];
    std::size_t length;
  };
  static const std::vector<Row> rows = {
      {{0x00}, {0x7F}, 1},
      {{0xC2, 0x80}, {0xDF, 0xBF}, 2},
      {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
      {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
      {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
      {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
      {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
      {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
      {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4},
  };
  for (const Row& row : rows) {
    if (at + row.length > s.size()) continue;
    bool inside = true;
    for (std::size_t k = 0; k < row.length; ++k) {
      const auto b = static_cast<unsigned char>(s[at + k]);
      inside = inside && b >= row.low[k] && b <= row.high[k];
    }
    if (inside) return row.length;
  }
  return 0;
}

bool table_valid(const std::string& s, std::size_t& bad_at) {
  for (std::size_t at = 0; at < s.size();) {
    const std::size_t length = table_sequence_length(s, at);
    if (length == 0) {
      bad_at = at;
      return false;
    }
    at += length;
  }
  return true;
}

// Random text near UTF-8: mostly lead bytes followed by continuation bytes, with the edges of
// every range (surrogates, overlong leads, F4 90, F5 and up) well represented.
std::string near_utf8(SeededRng& rng, std::size_t count) {
  static const unsigned char leads[] = {0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC,
                                        0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFE, 0xFF};
  static const unsigned char continuations[] = {0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0};
  std::string s;
  while (s.size() < count) {
    if (rng.below(4) == 0) {
      s += rng.bytes(1);
      continue;
    }
    s += static_cast<char>(leads[rng.below(sizeof leads)]);
    const std::size_t tail = rng.below(4);
    for (std::size_t k = 0; k < tail; ++k)
      s += static_cast<char>(rng.below(3) == 0 ? continuations[rng.below(sizeof continuations)]
                                               : 0x80 + rng.below(0x40));
  }
  return s;
}

}  // namespace

TEST_CASE("utf-8: valid_utf8 and next_code_point agree with Unicode's table of well-formed sequences") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  std::size_t valid = 0, invalid = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string s = near_utf8(rng, 1 + rng.below(12));
    std::size_t expected_bad = 0, got_bad = 0;
    const bool expected = table_valid(s, expected_bad);
    INFO("bytes " << sy::quoted_excerpt(s));
    REQUIRE(sy::valid_utf8(s, &got_bad) == expected);
    if (!expected) REQUIRE(got_bad == expected_bad);
    (expected ? valid : invalid) += 1;
    // The tokenizer's stepping reads the same: a code point exactly where the table has a sequence.
    for (std::size_t at = 0; at < s.size();) {
      const std::size_t start = at, length = table_sequence_length(s, at);
      const bool decoded = sy::text::next_code_point(s, at).has_value();
      REQUIRE(decoded == (length > 0));
      REQUIRE(at == start + (length > 0 ? length : 1));
    }
  }
  CHECK(valid > 400);  // both kinds well represented
  CHECK(invalid > 4000);
}

TEST_CASE("utf-8: a code point past U+10FFFF, a surrogate and an overlong form are not UTF-8") {
  for (const std::string& bad : {std::string("\xF7\x89\xBD\xA1"), std::string("\xF4\x90\x80\x80"), std::string("\xED\xA0\x80"),
                                std::string("\xC0\x80"), std::string("\xE0\x80\xAF"), std::string("\xF0\x80\x80\xAF")}) {
    INFO(sy::quoted_excerpt(bad));
    std::size_t bad_at = 99;
    CHECK_FALSE(sy::valid_utf8("ok " + bad, &bad_at));
    CHECK(bad_at == 3);
    CHECK(sy::replace_invalid_utf8("ok " + bad).find("ok \xEF\xBF\xBD") == 0);
    CHECK(sy::valid_utf8(sy::replace_invalid_utf8("ok " + bad)));
  }
  CHECK(sy::valid_utf8("\xF4\x8F\xBF\xBF \xED\x9F\xBF \xEE\x80\x80 \xC2\x80"));  // the edges that are fine
  CHECK(sy::replace_invalid_utf8("caf\xE9!") == "caf\xEF\xBF\xBD!");
}
