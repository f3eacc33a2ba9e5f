#pragma once
// Fatal input errors (unreadable files, broken config.json, hostile weight headers). Thrown where
// the problem is found, caught once by the command line, which prints `what()` and exits with
// `exit_code()`. The exit status says whose the problem is:
//   1 (kExitBadContent): the content of a profile or a model is wrong: a YAML rule, a config.json
//     value, a safetensors header's content, a checkpoint that disagrees with its config.json.
//     Fixing it means editing (or replacing) that file.
//   2 (kExitUsageOrIo): usage and I/O: a bad flag, a file that is missing, unreadable or not a
//     regular file, a failed write. Fixing it means changing the command or the machine.
// InputError's default is 2; every throw about a file's content passes kExitBadContent.
#include <stdexcept>
#include <string>

namespace switchyard {

constexpr int kExitBadContent = 1;
constexpr int kExitUsageOrIo = 2;

class InputError : public std::runtime_error {
 public:
  InputError(std::string message, int exit_code = kExitUsageOrIo)
      : std::runtime_error(std::move(message)), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace switchyard
