#include "operators/ops/build_context.h"

#include <stdexcept>

#include "core/error.h"
#include "core/weight_dtypes.h"
#include "core/half_float.h"
#include "operators/ops/device_runtime.h"

namespace switchyard {

const Module& BuildContext::child(const Module& parent, std::string_view local_name) const {
  for (int c : parent.children)
    if (tree.at(c).local_name() == local_name) return tree.at(c);
  throw std::logic_error(std::string(parent.name) + " has no child " + std::string(local_name));
}

KvCacheLayout BuildContext::kv_cache() const {
  return kv_cache_layout(tree.config(), max_context, switchyard::kv_cache_dtype(tree.config(), kv_cache_dtype));
}

Tensor BuildContext::param(const Module& module, std::string_view name, std::initializer_list<DType> dtypes) const {
  return param(module, name, std::span<const DType>(dtypes.begin(), dtypes.size()));
}

Tensor BuildContext::param(const Module& module, std::string_view name, std::span<const DType> dtypes) const {
  for (const Parameter& p : module.params) {
    if (p.name != name) continue;
    std::vector<std::int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
    const std::string full_name = std::string(module.name) + "." + std::string(name);
    // A weight stored in a type this operator does not take (a GGUF's quantised blocks, for an
    // operator that multiplies 16- or 32-bit floats) is dequantized once, here: to bf16 where the
    // operator takes it, as ktransformers' KLinearTorch does with a GGUF, except f16 weights,
    // which only f32 holds exactly.
    const DType stored = weights.stored_dtype(full_name);
    if (!is_runnable_weight_dtype(stored))
      throw InputError("tensor '" + full_name + "' is stored as " + dtype_name(stored) + "; run takes weights of " +
                           runnable_weight_dtypes_text(),
                       kExitBadContent);
    bool takes_stored = false, takes_bf16 = false, takes_f32 = false;
    for (DType d : dtypes) {
      takes_stored |= d == stored;
      takes_bf16 |= d == DType::bf16;
      takes_f32 |= d == DType::f32;
    }
    if (!takes_stored && stored != DType::f32 && (takes_bf16 || takes_f32))
      return weights.get_converted(full_name, shape,
                                   (stored == DType::f16 && takes_f32) || !takes_bf16 ? DType::f32 : DType::bf16);
    return weights.get(full_name, shape, dtypes);
  }
  throw std::logic_error(std::string(module.name) + " has no parameter " + std::string(name));
}

DType BuildContext::resident_dtype(const Module& module, std::string_view name, Device device) const {
  for (std::size_t i = 0; i < module.params.size(); ++i) {
    const Parameter& p = module.params[i];
    if (p.name != name) continue;
    // The plan resolved it from the dtype the check read for the tensor; the file must still say so.
    const std::string full_name = std::string(module.name) + "." + std::string(name);
    const DType stored = weights.stored_dtype(full_name);
    if (stored != p.dtype)
      throw InputError("tensor '" + full_name + "' is stored as " + dtype_name(stored) + ", but the plan was made for " +
                           dtype_name(p.dtype) + " (was the file rewritten since it was checked?)",
                       kExitBadContent);
    return plan.resident_dtype(index_of(module), static_cast<int>(i), device);
  }
  throw std::logic_error(std::string(module.name) + " has no parameter " + std::string(name));
}

std::vector<float> BuildContext::param_f32(const Module& module, std::string_view name) const {
  const Tensor t = param(module, name, {DType::f32, DType::bf16, DType::f16});
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  widen_to_f32(t.dtype(), t.data(), out.size(), out.data());
  return out;
}

Device BuildContext::generate_device(const Module& module) const { return plan.owner_of(index_of(module)).generate_device; }

Device BuildContext::prefill_device(const Module& module) const { return plan.owner_of(index_of(module)).prefill_device; }

PhaseImplementations BuildContext::implementation(const Module& module) const {
  return plan.implementation(index_of(module));
}

void BuildContext::record(const Module& module, PhaseImplementations implementation) const {
  if (built) built->modules.emplace_back(index_of(module), implementation);
}

Device BuildContext::device_of(const Module& module) const {
  const Device generate = generate_device(module), prefill = prefill_device(module);
  if (generate == prefill) return generate;
  throw InputError("the profile runs " + std::string(module.name) + " on " + prefill.str() + " for prefill and on " +
                   generate.str() + " for decode; only routed experts may run in two places");
}

DeviceRuntime* BuildContext::gpu(Device device) const {
  if (device.is_cpu()) return nullptr;
  if (runtimes == nullptr)
    throw InputError("the profile runs modules on " + device.str() +
                     ", but this build has no CUDA backend (configure with the CUDA toolkit, or use a CPU profile "
                     "such as optimize_rules/DeepSeek-V3-Chat-cpu.yaml)",
                     1);  // as an absent device: the profile does not fit this build
  return &runtimes->get(device);
}

}  // namespace switchyard
