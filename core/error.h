#pragma once
// Fatal input errors (unreadable files, broken config.json, hostile weight headers). Thrown where
// the problem is found, caught once by the command line, which prints `what()` and exits with
// `exit_code`: 1 for a bad model or profile, 2 for usage and I/O problems.
#include <stdexcept>
#include <string>

namespace switchyard {

class InputError : public std::runtime_error {
 public:
  InputError(std::string message, int exit_code = 2) : std::runtime_error(std::move(message)), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace switchyard
