#pragma once
// What one generation took (operators/model/generator.h): its prompt's tokens and the time to
// prefill them, and its decode steps and their time. A plain record, for the front ends (run,
// chat, serve's usage) that report it without needing the engine.
#include <cstdint>

namespace switchyard {

struct GenerationStats {
  std::int64_t prompt_tokens = 0;
  std::int64_t cached_tokens = 0;  // of prompt_tokens: already in the KV cache (KvPrefix), not run
  double prompt_seconds = 0;
  std::int64_t generated_tokens = 0;  // tokens produced by decode steps (the first comes from prefill)
  double decode_seconds = 0;          // seconds
};

}  // namespace switchyard
