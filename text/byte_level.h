#pragma once
// GPT-2's byte-level alphabet, which byte-level BPE tokenizers (DeepSeek-V3, Qwen3, GLM-4.5) spell
// their vocabulary in: each byte value is one printable code point. The printable ASCII and
// Latin-1 bytes stand for themselves ('!' .. '~', U+00A1 .. U+00AC, U+00AE .. U+00FF); the other 68
// (controls, space, U+00AD) become U+0100 onwards in byte order, so a space is 'Ġ' (U+0120) and a
// newline 'Ċ' (U+010A).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard::text {

// The UTF-8 of the code point that stands for `byte` (one or two bytes long).
std::string_view byte_symbol(std::uint8_t byte);

// `bytes` spelled in the alphabet: each byte as its symbol.
void append_byte_symbols(std::string_view bytes, std::string& out);

// The byte a code point stands for; nothing for a code point outside the alphabet.
std::optional<std::uint8_t> symbol_byte(char32_t code_point);

// A vocabulary entry spelled in the alphabet back to its bytes; false (and `out` partly
// written) when it holds a code point outside the alphabet or invalid UTF-8.
bool append_symbol_bytes(std::string_view symbols, std::string& out);

// The next code point of `s` at `at` (advanced past it), or nothing for bytes there that are not
// UTF-8 by core/text.h's strict reading (`at` then advances by one byte).
std::optional<char32_t> next_code_point(std::string_view s, std::size_t& at);

}  // namespace switchyard::text
