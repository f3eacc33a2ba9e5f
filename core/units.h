#pragma once
// Byte sizes as users write them ("24GiB", "80GB", "512MiB", "1.5TiB") and as reports print them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard {

// Decimal (KB, MB, GB, TB) and binary (KiB, MiB, GiB, TiB) units; a bare number is bytes.
// Returns nullopt for anything else, including negative or overflowing sizes.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);
// Binary units with one decimal, e.g. "23.4 GiB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace switchyard
