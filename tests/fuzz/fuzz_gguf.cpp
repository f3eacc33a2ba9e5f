// libFuzzer target for the GGUF reader: the input is one whole .gguf file. Rejecting it with
// InputError is the expected outcome for most inputs; any other exception, a crash or a sanitizer
// report is a bug. Of an accepted file, every metadata value is read in every way the API offers
// (each typed getter too, whose refusal is an InputError), and every tensor is viewed and its first
// and last bytes read; the promises the reader makes about tensors are checked, trapping when broken.
// The model config the metadata describes is read (core/gguf_description.h), and a file that
// carries a vocabulary (tokenizer.ggml.*) is read as a tokenizer too, which then encodes and
// decodes a fixed text.
// Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/gguf.h"
#include "core/gguf_description.h"
#include "text/gguf_vocabulary.h"
#include "text/tokenizer.h"

// What the target reads is summed here, visible outside this file, so no read is optimised away.
std::uint64_t fuzz_gguf_sink = 0;

namespace {

namespace sy = switchyard;

std::uint64_t& sink = fuzz_gguf_sink;

template <typename Read>
void read_or_refuse(Read&& read) {
  try {
    read();
  } catch (const sy::InputError&) {
  }
}

void read_value(const sy::GgufFile& gguf, const sy::GgufValue& v) {
  if (const auto n = v.as_int()) sink += static_cast<std::uint64_t>(*n);
  if (const auto x = v.as_number()) sink += static_cast<std::uint64_t>(*x == *x);
  if (const auto b = v.as_bool()) sink += *b;
  if (const auto s = v.as_string()) sink += s->size();
  sink += v.size() + static_cast<std::uint64_t>(v.element_type());
  read_or_refuse([&] { for (std::int64_t n : v.ints()) sink += static_cast<std::uint64_t>(n); });
  read_or_refuse([&] { for (double x : v.numbers()) sink += static_cast<std::uint64_t>(x == x); });
  read_or_refuse([&] { for (std::string_view s : v.strings()) sink += s.empty() ? 0 : static_cast<unsigned char>(s.back()); });
  const std::string_view key = v.key();
  if (gguf.find(key) != &v) __builtin_trap();  // keys are unique and found again
  read_or_refuse([&] { sink += gguf.string(key).value_or("").size(); });
  read_or_refuse([&] { sink += static_cast<std::uint64_t>(gguf.integer(key).value_or(0)); });
  read_or_refuse([&] { sink += static_cast<std::uint64_t>(gguf.number(key).value_or(0) == 0); });
  read_or_refuse([&] { sink += gguf.flag(key).value_or(false); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    const sy::GgufFile gguf = sy::parse_gguf_bytes(file, "fuzz.gguf");
    for (const sy::GgufValue& v : gguf.metadata()) read_value(gguf, v);
    const std::uint64_t data_start = gguf.data_offset(0);
    for (const sy::GgufTensorInfo& t : gguf.tensors()) {
      // What the reader promises: the bytes lie in the data section at an aligned offset, and are
      // exactly the storage of the shape's elements.
      std::uint64_t elements = 1;
      for (std::int64_t d : t.shape) elements *= static_cast<std::uint64_t>(d);
      if (t.offset < data_start || t.offset > size || t.bytes > size - t.offset) __builtin_trap();
      if ((t.offset - data_start) % gguf.alignment() != 0) __builtin_trap();
      if (t.shape.empty() || t.shape.size() > 4 || t.bytes != sy::storage_bytes(t.dtype, elements)) __builtin_trap();
      if (gguf.find_tensor(t.name) != &t) __builtin_trap();
      const sy::Tensor view = gguf.tensor(t);
      const auto* bytes = view.data_as<const std::uint8_t>();
      sink += bytes[0] + bytes[view.bytes() - 1];
    }
    // The model config its metadata describes: every key read, typed and range-checked.
    read_or_refuse([&] { sink += static_cast<std::uint64_t>(sy::gguf_file_config(gguf).num_hidden_layers); });
    if (sy::text::gguf_has_vocabulary(gguf)) {
      read_or_refuse([&] {
        const sy::text::Tokenizer t = sy::text::Tokenizer::from_json(sy::text::tokenizer_json_from_gguf(gguf), "fuzz.gguf");
        const std::vector<std::int32_t> ids = t.encode("Hello, world! 123 \xe4\xb8\x96\xe7\x95\x8c", true);
        sink += ids.size() + t.decode(ids).size();
      });
    }
  } catch (const sy::InputError&) {
  }
  return 0;
}
