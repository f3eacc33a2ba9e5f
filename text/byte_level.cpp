#include "text/byte_level.h"

#include <array>

#include "core/text.h"

namespace switchyard::text {
namespace {

struct Alphabet {
  std::array<char32_t, 256> code_point{};  // byte -> code point
  std::array<std::string, 256> utf8;       // byte -> its code point's UTF-8
  std::array<std::int16_t, 512> byte_of{};  // code point (< 512) -> byte, or -1
};

std::string utf8_of(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {  // the alphabet's code points are below U+0800
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

const Alphabet& alphabet() {
  static const Alphabet a = [] {
    Alphabet out;
    out.byte_of.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) out.code_point[static_cast<std::size_t>(b)] = printable(b) ? static_cast<char32_t>(b) : next++;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = out.code_point[static_cast<std::size_t>(b)];
      out.utf8[static_cast<std::size_t>(b)] = utf8_of(c);
      out.byte_of[c] = static_cast<std::int16_t>(b);
    }
    return out;
  }();
  return a;
}

}  // namespace

std::string_view byte_symbol(std::uint8_t byte) { return alphabet().utf8[byte]; }

void append_byte_symbols(std::string_view bytes, std::string& out) {
  const Alphabet& a = alphabet();
  for (char c : bytes) out += a.utf8[static_cast<std::uint8_t>(c)];
}

std::optional<std::uint8_t> symbol_byte(char32_t code_point) {
  if (code_point >= 512) return std::nullopt;
  const std::int16_t b = alphabet().byte_of[code_point];
  if (b < 0) return std::nullopt;
  return static_cast<std::uint8_t>(b);
}

std::optional<char32_t> next_code_point(std::string_view s, std::size_t& at) {
  char32_t c = 0;
  const std::size_t length = decode_utf8(s, at, c);
  if (length == 0) {
    ++at;
    return std::nullopt;
  }
  at += length;
  return c;
}

bool append_symbol_bytes(std::string_view symbols, std::string& out) {
  for (std::size_t at = 0; at < symbols.size();) {
    const std::optional<char32_t> c = next_code_point(symbols, at);
    if (!c) return false;
    const std::optional<std::uint8_t> b = symbol_byte(*c);
    if (!b) return false;
    out += static_cast<char>(*b);
  }
  return true;
}

}  // namespace switchyard::text
