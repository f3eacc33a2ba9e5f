#include "core/models/tree_builder.h"

namespace switchyard::models {

Shape shape1(std::int64_t a) { return Shape{{a, 0, 0, 0}, 1}; }
Shape shape2(std::int64_t a, std::int64_t b) { return Shape{{a, b, 0, 0}, 2}; }

const ModuleClass& TreeBuilder::resolve(const char* native_name) {
  for (const auto& [name, cls] : classes_)
    if (name == native_name) return *cls;
  const ModuleClass& cls = module_class(native_name);
  classes_.emplace_back(native_name, &cls);
  return cls;
}

int TreeBuilder::layer(int parent, int index, const char* cls) {
  const int m = tree_.add(parent, std::to_string(index), resolve(cls));
  tree_.at(m).layer = index;
  return m;
}

int TreeBuilder::expert(int parent, int index, const char* cls) {
  const int m = tree_.add(parent, std::to_string(index), resolve(cls));
  tree_.at(m).expert = index;
  return m;
}

void TreeBuilder::param(int module, std::string name, Shape shape, TensorKind kind) {
  const DType dtype = scheme_.dtype_for(kind, tree_.at(module).layer, tree_.num_layers());
  tree_.add_param(module, std::move(name), shape, dtype, kind);
  if (scheme_.fp8_block_scales && dtype == DType::f8_e4m3 && shape.rank == 2) {
    // DeepSeek's FP8 checkpoints carry one f32 inverse scale per 128x128 weight block.
    constexpr std::int64_t kBlock = 128;
    tree_.add_param(module, "weight_scale_inv",
                    shape2((shape.dims[0] + kBlock - 1) / kBlock, (shape.dims[1] + kBlock - 1) / kBlock),
                    DType::f32, TensorKind::block_scale);
  }
}

int TreeBuilder::linear(int parent, std::string_view name, std::int64_t out_features, std::int64_t in_features,
                        TensorKind kind, bool bias) {
  const int m = module(parent, name, "Linear");
  param(m, "weight", shape2(out_features, in_features), kind);
  if (bias) param(m, "bias", shape1(out_features), TensorKind::bias);
  return m;
}

int TreeBuilder::norm(int parent, std::string_view name, std::int64_t width, const char* cls) {
  const int m = module(parent, name, cls);
  param(m, "weight", shape1(width), TensorKind::norm);
  return m;
}

void TreeBuilder::swiglu(int mlp, std::int64_t hidden, std::int64_t intermediate, TensorKind gate_up_kind,
                         TensorKind down_kind, const char* gate_name, const char* up_name, const char* down_name) {
  // Registration order is the checkpoint classes' __init__ order.
  linear(mlp, gate_name, intermediate, hidden, gate_up_kind);
  if (std::string_view(gate_name) == "w1") {  // Mixtral: w1, w2, w3
    linear(mlp, down_name, hidden, intermediate, down_kind);
    linear(mlp, up_name, intermediate, hidden, gate_up_kind);
  } else {
    linear(mlp, up_name, intermediate, hidden, gate_up_kind);
    linear(mlp, down_name, hidden, intermediate, down_kind);
  }
}

}  // namespace switchyard::models

namespace switchyard {

ModuleTree build_module_tree(const ModelConfig& config, const WeightScheme& scheme) {
  ModuleTree tree(config);
  // Experts dominate: each is a module with three projections. Reserving once avoids moving
  // 60k modules around while the vector grows.
  tree.reserve(static_cast<std::size_t>(config.num_hidden_layers) * (4 * static_cast<std::size_t>(config.n_routed_experts) + 32) + 16);
  models::TreeBuilder builder(tree, scheme);
  config.family->build_tree(builder);
  return tree;
}

}  // namespace switchyard
