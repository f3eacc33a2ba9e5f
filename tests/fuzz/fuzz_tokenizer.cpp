// libFuzzer target for a tokenizer.json (text/tokenizer.h): the input is the file's text. A file
// that loads then encodes a fixed mixed text and the input itself (as text, where it is UTF-8),
// and decodes and streams the ids back. InputError is the expected answer to a bad file or text;
// any other exception, a crash, a sanitizer report or a time-out is a bug. docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  using switchyard::text::Tokenizer;
  try {
    const Tokenizer t = Tokenizer::from_json(input, "fuzz.json");
    for (const std::string_view text : {std::string_view("Hello, world! 你好 12345 \n\t <eos> 👍🏽"), input}) {
      try {
        const std::vector<std::int32_t> ids = t.encode(text, true);
        const std::string back = t.decode(ids);
        switchyard::text::StreamDecoder stream(t, false);
        std::string streamed;
        for (std::int32_t id : ids) streamed += stream.push(id);
        // Whole characters: what the stream gave before its end is a prefix of the decoded text.
        if (back.compare(0, streamed.size(), streamed) != 0) __builtin_trap();
        streamed += stream.finish();
      } catch (const switchyard::InputError&) {
      }
    }
  } catch (const switchyard::InputError&) {
  }
  return 0;
}
