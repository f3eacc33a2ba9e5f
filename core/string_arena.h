#pragma once
// StringArena: owns many small strings in large blocks and hands out views that stay valid for
// the arena's life (moving the arena keeps them valid too). A 671B model has 60k module names;
// one allocation per name would dominate the cost of a dry run.
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace switchyard {

class StringArena {
 public:
  StringArena() = default;
  StringArena(StringArena&&) = default;
  StringArena& operator=(StringArena&&) = default;
  StringArena(const StringArena&) = delete;
  StringArena& operator=(const StringArena&) = delete;

  // A stable copy of `a`, `b` and `c` joined (any may be empty).
  std::string_view store(std::string_view a, std::string_view b = {}, std::string_view c = {}) {
    const std::size_t size = a.size() + b.size() + c.size();
    if (size > left_) {
      const std::size_t block = size > kBlockBytes ? size : kBlockBytes;
      blocks_.push_back(std::make_unique_for_overwrite<char[]>(block));
      next_ = blocks_.back().get();
      left_ = block;
    }
    char* out = next_;
    if (!a.empty()) std::memcpy(out, a.data(), a.size());
    if (!b.empty()) std::memcpy(out + a.size(), b.data(), b.size());
    if (!c.empty()) std::memcpy(out + a.size() + b.size(), c.data(), c.size());
    next_ += size;
    left_ -= size;
    return {out, size};
  }

 private:
  static constexpr std::size_t kBlockBytes = 256 * 1024;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace switchyard
