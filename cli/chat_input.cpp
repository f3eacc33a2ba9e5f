#include "cli/chat_input.h"

#include <poll.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>

#ifndef SWITCHYARD_HAVE_LIBEDIT
#define SWITCHYARD_HAVE_LIBEDIT 0
#endif
#if SWITCHYARD_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace switchyard::cli {
namespace {

// How long after a line ends the next one must already be waiting to count as the same paste: a
// terminal delivers a paste in one burst, and no one types a line in this time.
constexpr int kPasteGapMs = 15;

bool input_waiting(int timeout_ms) {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN) != 0;
}

}  // namespace

ChatInput::ChatInput() {
  terminal_ = ::isatty(STDIN_FILENO) == 1;
#if SWITCHYARD_HAVE_LIBEDIT
  editing_ = terminal_ && ::isatty(STDOUT_FILENO) == 1;
  if (editing_) {
    // The editor decodes what is typed by LC_CTYPE; chat's text is UTF-8 whatever the user's
    // locale (the tokenizer takes nothing else), so under the C locale "你好" would be dropped.
    if (std::string_view(std::setlocale(LC_CTYPE, "")).find("UTF-8") == std::string_view::npos &&
        std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr)
      std::setlocale(LC_CTYPE, "");
    rl_readline_name = "switchyard";
    using_history();
  }
#endif
}

ChatInput::~ChatInput() = default;

std::optional<std::string> ChatInput::read_line(const char* prompt) {
#if SWITCHYARD_HAVE_LIBEDIT
  if (editing_) {
    char* line = ::readline(prompt);
    if (line == nullptr) return std::nullopt;
    std::string out(line);
    std::free(line);
    return out;
  }
#endif
  std::fputs(prompt, stdout);
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::optional<std::string> ChatInput::read(const char* prompt, const char* continuation) {
  std::optional<std::string> line = read_line(prompt);
  if (!line) return std::nullopt;
  std::string message;
  for (;;) {
    const bool continued = !line->empty() && line->back() == '\\';
    if (continued) line->pop_back();
    message += *line;
    const bool pasted = !continued && terminal_ && input_waiting(kPasteGapMs);
    if (!continued && !pasted) break;
    message += '\n';
    line = read_line(pasted ? "" : continuation);
    if (!line) break;  // the end of input ends the message too
  }
#if SWITCHYARD_HAVE_LIBEDIT
  // One line of history per message; a message of several lines would come back as one long line.
  if (editing_ && !message.empty() && message.find('\n') == std::string::npos) add_history(message.c_str());
#endif
  return message;
}

}  // namespace switchyard::cli
