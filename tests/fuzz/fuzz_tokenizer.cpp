// libFuzzer target for tokenizers (text/tokenizer.h), in two modes chosen by the input's first byte:
// - '{': the input is a tokenizer.json. A file that loads encodes a fixed mixed text and the input
//   itself (as text), and decodes and streams the ids back.
// - anything else: the input is arbitrary bytes, encoded as text by a fixed byte-level BPE
//   tokenizer whose pre-tokenizer runs PCRE2 in UTF mode (a Split with Unicode classes, then
//   ByteLevel's GPT-2 pattern): the path where bytes that are not strict UTF-8 reach PCRE2.
// InputError is the expected answer to a bad file or text; any other exception, a crash, a
// sanitizer report or a time-out is a bug. docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"
#include "tests/fuzz/byte_level_tokenizer.h"

namespace {

using switchyard::text::Tokenizer;

// Encodes `text`, decodes the ids back and streams them; the stream's pieces must be a prefix of
// the decoded text (whole characters only before its end).
void round_trip(const Tokenizer& t, std::string_view text) {
  try {
    const std::vector<std::int32_t> ids = t.encode(text, true);
    const std::string back = t.decode(ids);
    switchyard::text::StreamDecoder stream(t, false);
    std::string streamed;
    for (std::int32_t id : ids) streamed += stream.push(id);
    if (back.compare(0, streamed.size(), streamed) != 0) __builtin_trap();
    streamed += stream.finish();
  } catch (const switchyard::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.empty() || input.front() != '{') {
    round_trip(switchyard::fuzz::byte_level_tokenizer(), input);
    return 0;
  }
  try {
    const Tokenizer t = Tokenizer::from_json(input, "fuzz.json");
    round_trip(t, "Hello, world! 你好 12345 \n\t <eos> 👍🏽");
    round_trip(t, input);
  } catch (const switchyard::InputError&) {
  }
  return 0;
}
