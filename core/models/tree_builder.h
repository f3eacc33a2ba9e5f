#pragma once
// Helpers the families' tree builders share (core/model_family.h): they add modules with their
// parameters and ask the weight scheme for each parameter's dtype. Internal to core/.
#include "core/module_tree.h"

namespace switchyard::models {

class TreeBuilder {
 public:
  TreeBuilder(ModuleTree& tree, const WeightScheme& scheme) : tree_(tree), scheme_(scheme) {}

  ModuleTree& tree() { return tree_; }
  int root(const char* cls) { return tree_.add_root(resolve(cls)); }
  int module(int parent, std::string_view name, const char* cls) { return tree_.add(parent, name, resolve(cls)); }
  // A decoder layer (or an expert) is a module whose index its descendants inherit.
  int layer(int parent, int index, const char* cls);
  int expert(int parent, int index, const char* cls);

  // nn.Linear: weight [out_features, in_features] (+ FP8 block scales where the scheme stores FP8),
  // and bias [out_features] when asked for.
  int linear(int parent, std::string_view name, std::int64_t out_features, std::int64_t in_features,
             TensorKind kind, bool bias = false);
  int norm(int parent, std::string_view name, std::int64_t width, const char* cls);
  void param(int module, std::string name, Shape shape, TensorKind kind);
  // SwiGLU MLP with the given projection names (gate/up/down or w1/w3/w2).
  void swiglu(int mlp, std::int64_t hidden, std::int64_t intermediate, TensorKind gate_up_kind,
              TensorKind down_kind, const char* gate_name = "gate_proj", const char* up_name = "up_proj",
              const char* down_name = "down_proj");

 private:
  // Class lookups by the literal's address: the builders ask for the same few classes 60k times.
  const ModuleClass& resolve(const char* native_name);

  ModuleTree& tree_;
  const WeightScheme& scheme_;
  std::vector<std::pair<const char*, const ModuleClass*>> classes_;
};

Shape shape1(std::int64_t a);
Shape shape2(std::int64_t a, std::int64_t b);

}  // namespace switchyard::models
