#include "placement/module_name_index.h"

#include <algorithm>

namespace switchyard {
namespace {

std::vector<std::string_view> split_dots(std::string_view text) {
  std::vector<std::string_view> pieces;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = text.find('.', begin);
    pieces.push_back(text.substr(begin, dot == std::string_view::npos ? std::string_view::npos : dot - begin));
    if (dot == std::string_view::npos) return pieces;
    begin = dot + 1;
  }
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

ModuleNameIndex::ModuleNameIndex(const ModuleTree& tree) : module_count_(tree.size()) {
  for (std::size_t m = 0; m < tree.size(); ++m) {
    const std::string_view name = tree.at(static_cast<int>(m)).name;
    if (name.empty()) continue;  // the root has no components
    for (std::string_view piece : split_dots(name)) {
      auto [it, added] = component_index_.try_emplace(std::string(piece), static_cast<int>(components_.size()));
      if (added) {
        components_.emplace_back(piece);
        modules_with_.emplace_back();
      }
      std::vector<int>& modules = modules_with_[static_cast<std::size_t>(it->second)];
      // A name can hold a component twice ("model.layers.3.mlp.experts.3"); list the module once.
      if (modules.empty() || modules.back() != static_cast<int>(m)) modules.push_back(static_cast<int>(m));
    }
  }
}

const std::vector<int>& ModuleNameIndex::compatible(char position, std::string_view piece) const {
  std::string key = std::string(1, position) + std::string(piece);
  const auto found = compatible_.find(key);
  if (found != compatible_.end()) return found->second;
  std::vector<int> components;
  if (position == 'i') {
    const auto it = component_index_.find(std::string(piece));
    if (it != component_index_.end()) components.push_back(it->second);
  } else {
    for (std::size_t c = 0; c < components_.size(); ++c) {
      const std::string_view component = components_[c];
      const bool fits = position == 'a'   ? component.find(piece) != std::string_view::npos
                        : position == 's' ? ends_with(component, piece)
                                          : component.substr(0, piece.size()) == piece;
      if (fits) components.push_back(static_cast<int>(c));
    }
  }
  return compatible_.emplace(std::move(key), std::move(components)).first->second;
}

std::optional<std::vector<int>> ModuleNameIndex::candidates(std::span<const std::string> literals) const {
  // Each piece of each literal names the components it is compatible with; the piece with the
  // fewest modules behind its components decides.
  std::vector<int> best_components;
  std::size_t best_cost = module_count_ + 1;
  for (const std::string& literal : literals) {
    if (literal.empty()) continue;
    const std::vector<std::string_view> pieces = split_dots(literal);
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      const std::string_view piece = pieces[k];
      const bool first = k == 0, last = k + 1 == pieces.size();
      if (piece.empty() && (first || last)) continue;  // the literal starts or ends at a dot: no constraint
      const std::vector<int>& compatible = this->compatible(first && last ? 'a' : first ? 's' : last ? 'e' : 'i', piece);
      std::size_t cost = 0;
      for (int c : compatible) cost += modules_with_[static_cast<std::size_t>(c)].size();
      if (cost < best_cost) {
        best_cost = cost;
        best_components = compatible;
      }
    }
  }
  // Past a quarter of the tree, walking every module in order is cheaper than gathering them.
  if (best_cost > module_count_ / 4) return std::nullopt;
  std::vector<int> modules;
  modules.reserve(best_cost);
  for (int c : best_components) {
    const std::vector<int>& with = modules_with_[static_cast<std::size_t>(c)];
    modules.insert(modules.end(), with.begin(), with.end());
  }
  std::sort(modules.begin(), modules.end());
  modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
  return modules;
}

}  // namespace switchyard
