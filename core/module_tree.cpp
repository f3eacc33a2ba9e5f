#include "core/module_tree.h"

#include <charconv>
#include <stdexcept>

namespace switchyard {

std::uint64_t Shape::elements() const {
  std::uint64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= static_cast<std::uint64_t>(dims[static_cast<std::size_t>(i)]);
  return n;
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) out += (i ? ", " : "") + std::to_string(dims[static_cast<std::size_t>(i)]);
  return out + "]";
}

bool Shape::operator==(const Shape& other) const {
  if (rank != other.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<std::size_t>(i)] != other.dims[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::string_view Module::local_name() const {
  const std::string_view n = name;
  const auto dot = n.rfind('.');
  return dot == std::string_view::npos ? n : n.substr(dot + 1);
}

std::uint64_t Module::own_bytes() const {
  std::uint64_t total = 0;
  for (const Parameter& p : params) total += p.bytes();
  return total;
}

bool ModuleTree::is_routed_experts(int index) const {
  const Module& module = at(index);
  return module.parent >= 0 && module.local_name() == "experts" && at(module.parent).cls->role == ModuleRole::moe;
}

std::vector<int> ModuleTree::routed_experts() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(modules_.size()); ++i)
    if (is_routed_experts(i)) out.push_back(i);
  return out;
}

int ModuleTree::find(std::string_view name) const {
  if (modules_.empty()) return -1;
  int current = 0;
  if (name.empty()) return current;
  if (name.back() == '.') return -1;  // "model." names no module; the loop would stop at "model"
  while (!name.empty()) {
    const auto dot = name.find('.');
    const std::string_view component = name.substr(0, dot);
    name = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
    if (component.empty()) return -1;
    const std::vector<int>& children = at(current).children;
    // Numbered children (layers, experts) sit at their number: try that slot first.
    std::size_t slot = 0;
    const auto [end, ec] = std::from_chars(component.data(), component.data() + component.size(), slot);
    int next = -1;
    if (ec == std::errc() && end == component.data() + component.size() && slot < children.size() &&
        at(children[slot]).local_name() == component)
      next = children[slot];
    for (std::size_t i = 0; next < 0 && i < children.size(); ++i)
      if (at(children[i]).local_name() == component) next = children[i];
    if (next < 0) return -1;
    current = next;
  }
  return current;
}

std::uint64_t ModuleTree::subtree_bytes(int index) const {
  std::uint64_t total = at(index).own_bytes();
  for (int child : at(index).children) total += subtree_bytes(child);
  return total;
}

std::uint64_t ModuleTree::total_parameter_count() const {
  std::uint64_t total = 0;
  for (const Module& m : modules_)
    for (const Parameter& p : m.params)
      if (p.kind != TensorKind::block_scale) total += p.shape.elements();
  return total;
}

int ModuleTree::add_root(const ModuleClass& cls) {
  if (!modules_.empty()) throw std::logic_error("module tree already has a root");
  Module root;
  root.cls = &cls;
  modules_.push_back(std::move(root));
  return 0;
}

int ModuleTree::add(int parent, std::string_view local_name, const ModuleClass& cls) {
  Module m;
  const Module& p = at(parent);
  m.name = p.name.empty() ? names_.store(local_name)
                          : names_.store(p.name, ".", local_name);
  m.cls = &cls;
  m.parent = parent;
  m.layer = p.layer;
  m.expert = p.expert;
  const int index = static_cast<int>(modules_.size());
  modules_.push_back(std::move(m));
  at(parent).children.push_back(index);
  return index;
}

void ModuleTree::add_param(int module, std::string_view name, Shape shape, DType dtype, TensorKind kind) {
  at(module).params.push_back(Parameter{names_.store(name), shape, dtype, kind});
}

}  // namespace switchyard
