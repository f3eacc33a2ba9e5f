#include "cli/embedded_tokenizer.h"

#ifdef SWITCHYARD_EMBEDDED_TOKENIZER_JSON
// The files as read-only data, bracketed by start and end symbols (cmake passes their paths and
// rebuilds this file when they change).
#define SWITCHYARD_INCBIN(name, file)                         \
  asm(".pushsection .rodata\n"                                \
      ".balign 16\n"                                          \
      ".global switchyard_" #name "_start\n"                  \
      "switchyard_" #name "_start:\n"                         \
      ".incbin \"" file "\"\n"                                \
      ".global switchyard_" #name "_end\n"                    \
      "switchyard_" #name "_end:\n"                           \
      ".byte 0\n"                                             \
      ".popsection\n");                                       \
  extern "C" const char switchyard_##name##_start[];          \
  extern "C" const char switchyard_##name##_end[];
SWITCHYARD_INCBIN(tokenizer_json, SWITCHYARD_EMBEDDED_TOKENIZER_JSON)
SWITCHYARD_INCBIN(tokenizer_config_json, SWITCHYARD_EMBEDDED_TOKENIZER_CONFIG_JSON)
#endif

namespace switchyard::cli {

std::optional<EmbeddedTokenizer> embedded_tokenizer() {
#ifdef SWITCHYARD_EMBEDDED_TOKENIZER_JSON
  return EmbeddedTokenizer{
      std::string_view(switchyard_tokenizer_json_start, static_cast<std::size_t>(switchyard_tokenizer_json_end - switchyard_tokenizer_json_start)),
      std::string_view(switchyard_tokenizer_config_json_start,
                       static_cast<std::size_t>(switchyard_tokenizer_config_json_end - switchyard_tokenizer_config_json_start))};
#else
  return std::nullopt;
#endif
}

}  // namespace switchyard::cli
