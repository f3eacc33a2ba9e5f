#pragma once
// Logical GPUs onto physical ones (--device_map). A profile names logical devices, cuda:0 ..
// cuda:N-1, each of which gets its own stream, memory pool, cuBLAS handle, hand-off buffers and
// graph segment; the map says which CUDA ordinal of this process runs each. Folding a 4-, 6- or
// 8-GPU profile onto one or two GPUs keeps every boundary, copy and graph of the real layout, and
// check adds the folded devices' memory against the physical GPU's budget.
//
// Spelling, a comma list:  cuda:1=0         logical cuda:1 on physical GPU 0
//                          cuda:4-7=1       logical cuda:4 .. cuda:7 on physical GPU 1
//                          all=0 (or 0)     every logical GPU on physical GPU 0
// A logical GPU the list leaves out runs on the physical GPU of its own number. The physical side
// may be written cuda:P too.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

class DeviceMap {
 public:
  DeviceMap() = default;  // the identity: cuda:N on GPU N
  // InputError (exit 2) naming --device_map and the item when `text` is not a map.
  static DeviceMap parse(std::string_view text);

  // The physical ordinal of logical GPU `logical`.
  int physical(int logical) const;
  bool identity() const { return all_ < 0 && entries_.empty(); }
  // Logical GPUs [0, logical_gpus) grouped by their physical ordinal, in order.
  std::map<int, std::vector<int>> folded(int logical_gpus) const;
  // As typed after parsing, canonical: "all=0" or "cuda:1=0,cuda:2=0"; "" for the identity.
  std::string str() const;

 private:
  int all_ = -1;                // every logical GPU not in entries_ goes here; -1: its own number
  std::map<int, int> entries_;  // logical -> physical
};

}  // namespace switchyard
