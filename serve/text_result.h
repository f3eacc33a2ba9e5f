#pragma once
// What a text generation gave (serve/text_generation.h): the text, the token counts and why it
// ended. Apart from the engine, so that the API's bodies (serve/openai_api.h) can be built and
// fuzzed without it.
#include <cstdint>
#include <string>

#include "operators/model/generation_stats.h"

namespace switchyard::serve {

enum class TextFinish { stop, length, cancelled };

struct TextResult {
  std::string text;                  // everything handed to on_text, in order
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;  // ids generated, an end id included
  TextFinish finish = TextFinish::length;
  GenerationStats stats;
};

}  // namespace switchyard::serve
