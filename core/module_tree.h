#pragma once
// ModuleTree: every module of a model, with the checkpoint's names and classes and each module's
// own parameters (name, shape, dtype). It is the tree ktransformers rules are written against:
// "" is the causal-LM root, then "model", "model.layers.3.mlp.experts.17.down_proj", "lm_head".
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/model_config.h"
#include "core/module_class.h"
#include "core/string_arena.h"
#include "core/weight_scheme.h"

namespace switchyard {

struct Shape {
  std::array<std::int64_t, 4> dims{};
  int rank = 0;
  std::uint64_t elements() const;
  std::string str() const;  // "[7168, 2048]"
  bool operator==(const Shape& other) const;
};

struct Parameter {
  std::string_view name;  // local: "weight", "e_score_correction_bias"; owned by the tree
  Shape shape;
  DType dtype = DType::bf16;
  TensorKind kind = TensorKind::attention;
  std::uint64_t bytes() const { return storage_bytes(dtype, shape.elements()); }
};

struct Module {
  std::string_view name;  // full dotted name, "" for the root; owned by the tree
  const ModuleClass* cls = nullptr;
  int parent = -1;
  std::vector<int> children;      // in registration (walk) order
  std::vector<Parameter> params;  // this module's own parameters, not its children's
  int layer = -1;                 // decoder layer, -1 outside model.layers.N
  int expert = -1;                // routed expert index, -1 outside mlp.experts.E

  std::string_view local_name() const;  // last component: "down_proj", "17", "model"
  std::uint64_t own_bytes() const;
};

class ModuleTree {
 public:
  explicit ModuleTree(ModelConfig config) : config_(std::move(config)) {}
  // Names are views into the tree's own arena: a tree moves, it is not copied.
  ModuleTree(ModuleTree&&) = default;
  ModuleTree& operator=(ModuleTree&&) = default;
  ModuleTree(const ModuleTree&) = delete;
  ModuleTree& operator=(const ModuleTree&) = delete;
  const ModelConfig& config() const { return config_; }
  const std::vector<Module>& modules() const { return modules_; }
  const Module& at(int index) const { return modules_[static_cast<std::size_t>(index)]; }
  Module& at(int index) { return modules_[static_cast<std::size_t>(index)]; }
  std::size_t size() const { return modules_.size(); }
  int num_layers() const { return config_.num_hidden_layers; }
  // Whether module `index` is a MoE block's routed experts: the `experts` container under a
  // ModuleRole::moe module, one child per expert.
  bool is_routed_experts(int index) const;
  // The routed-experts containers, in module order (so in layer order): one per MoE layer.
  std::vector<int> routed_experts() const;

  // Index of the module with this full name, or -1. Walks down from the root component by
  // component, so no name index has to be built for a 60k-module tree.
  int find(std::string_view name) const;
  void reserve(std::size_t modules) { modules_.reserve(modules); }
  // Parameter bytes of the module and everything below it.
  std::uint64_t subtree_bytes(int index) const;
  std::uint64_t total_parameter_count() const;

  // Builder API: modules are added parent first, children in registration order.
  int add_root(const ModuleClass& cls);
  int add(int parent, std::string_view local_name, const ModuleClass& cls);
  void add_param(int module, std::string_view name, Shape shape, DType dtype, TensorKind kind);

 private:
  ModelConfig config_;
  std::vector<Module> modules_;
  StringArena names_;
};

// The module tree of `config`'s architecture, with dtypes chosen by `scheme`.
ModuleTree build_module_tree(const ModelConfig& config, const WeightScheme& scheme);

}  // namespace switchyard
