#pragma once
// Stop strings over streamed text: generation ends where one of them first completes, and the
// text handed on ends just before it (where several complete at the same byte, before the longest). Text that could still become a stop string is held back until
// the next piece tells (at most the longest stop string's length less one byte), so that no
// client ever sees part of a stop string.
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::text {

class StopStrings {
 public:
  // Empty strings are ignored.
  explicit StopStrings(std::vector<std::string> stops = {});
  // The text now safe to hand on (possibly ""). After a stop string appears, stopped() is true and
  // this and later calls return only what came before it.
  std::string push(std::string_view piece);
  // At the end of generation: the text held back (none once stopped).
  std::string finish();
  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace switchyard::text
