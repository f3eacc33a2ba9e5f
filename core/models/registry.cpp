// The list of model families. Each name below is a function `const ModelFamily& models::NAME()`
// defined in its core/models/<family>.cpp; a new family adds one line here, in the order that
// messages and `--help` list the families and their presets.
#include "core/model_family.h"

#define SWITCHYARD_FOR_EACH_FAMILY(FAMILY) \
  FAMILY(deepseek_v3)                      \
  FAMILY(deepseek_v2)                      \
  FAMILY(qwen3_moe)                        \
  FAMILY(mixtral)                          \
  FAMILY(glm4_moe)                         \
  /* a new family: one line above this one */

namespace switchyard {
namespace models {
#define SWITCHYARD_DECLARE_FAMILY(name) const ModelFamily& name();
SWITCHYARD_FOR_EACH_FAMILY(SWITCHYARD_DECLARE_FAMILY)
#undef SWITCHYARD_DECLARE_FAMILY
}  // namespace models

const std::vector<const ModelFamily*>& model_families() {
#define SWITCHYARD_LIST_FAMILY(name) &models::name(),
  static const std::vector<const ModelFamily*> families = {SWITCHYARD_FOR_EACH_FAMILY(SWITCHYARD_LIST_FAMILY)};
#undef SWITCHYARD_LIST_FAMILY
  return families;
}

const ModelFamily* find_model_family(std::string_view model_type) {
  for (const ModelFamily* family : model_families())
    if (family->model_type == model_type) return family;
  return nullptr;
}

const ModelFamily* find_gguf_family(std::string_view architecture) {
  for (const ModelFamily* family : model_families())
    if (!family->gguf.architecture.empty() && family->gguf.architecture == architecture) return family;
  return nullptr;
}

std::vector<std::string> model_family_names() {
  std::vector<std::string> names;
  for (const ModelFamily* family : model_families()) names.push_back(family->model_type);
  return names;
}

}  // namespace switchyard
