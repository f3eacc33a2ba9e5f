#include "operators/build_context.h"

#include <stdexcept>

#include "core/error.h"
#include "operators/cpu/half.h"

namespace switchyard {

const Module& BuildContext::child(const Module& parent, std::string_view local_name) const {
  for (int c : parent.children)
    if (tree.at(c).local_name() == local_name) return tree.at(c);
  throw std::logic_error(std::string(parent.name) + " has no child " + std::string(local_name));
}

Tensor BuildContext::param(const Module& module, std::string_view name, std::initializer_list<DType> dtypes) const {
  for (const Parameter& p : module.params) {
    if (p.name != name) continue;
    std::vector<std::int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
    return weights.get(std::string(module.name) + "." + std::string(name), shape, dtypes);
  }
  throw std::logic_error(std::string(module.name) + " has no parameter " + std::string(name));
}

std::vector<float> BuildContext::param_f32(const Module& module, std::string_view name) const {
  const Tensor t = param(module, name, {DType::f32, DType::bf16, DType::f16});
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  cpu::widen_to_f32(t.dtype(), t.data(), out.size(), out.data());
  return out;
}

void BuildContext::require_cpu(const Module& module) const {
  const int index = static_cast<int>(&module - tree.modules().data());
  const ModulePlacement& p = plan.owner_of(index);
  if (p.generate_device.is_cpu() && p.prefill_device.is_cpu()) return;
  throw InputError("the profile runs " + std::string(module.name) + " on " +
                   (p.generate_device.is_cpu() ? p.prefill_device : p.generate_device).str() +
                   ", but this build runs models on the CPU only (the CUDA backend comes with issue #4); "
                   "use a CPU profile such as optimize_rules/DeepSeek-V3-Chat-cpu.yaml");
}

}  // namespace switchyard
