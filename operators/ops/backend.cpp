#include "operators/ops/backend.h"

#include <string>

#include "core/error.h"

namespace switchyard {

std::unique_ptr<Accelerators> make_accelerators(std::int64_t max_tokens, const DeviceMap& map) {
  for (const Backend* backend : backends())
    if (backend->accelerators != nullptr) return backend->accelerators(max_tokens, map);
  return nullptr;
}

std::unique_ptr<ExpertsWork> build_host_experts(const BuildContext& context, const Module& experts) {
  const HostExpertsBuilder build = find_builder(&Backend::host_experts, Implementation::experts_cpu);
  if (build == nullptr)
    throw InputError("this build of Switchyard cannot hold " + std::string(experts.name) + " in host memory (" +
                     implementation_name(Implementation::experts_cpu) + ")");
  return build(context, experts);
}

}  // namespace switchyard
