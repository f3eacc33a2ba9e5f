#pragma once
// What a person types at `chat`'s prompt, one message at a time. On a terminal, with libedit: line
// editing (arrows, Home/End, Ctrl-A/E/W), history (Up/Down recall the session's earlier lines),
// and a paste of several lines taken as one message (the lines after the first are already
// waiting when the first ends, which typing never does). Anywhere: a line ending in '\' goes on
// on the next line. From a pipe or a file, each line is a message.
#include <optional>
#include <string>

namespace switchyard::cli {

class ChatInput {
 public:
  ChatInput();
  ~ChatInput();
  ChatInput(const ChatInput&) = delete;
  ChatInput& operator=(const ChatInput&) = delete;

  // The next message, its lines joined by '\n'; nothing at the end of input, or when a signal
  // (Ctrl-C) ends the read at the prompt. `prompt` opens the first line, `continuation` the others.
  std::optional<std::string> read(const char* prompt, const char* continuation);
  // Whether lines are edited on a terminal (libedit), rather than read as they come.
  bool editing() const { return editing_; }

 private:
  std::optional<std::string> read_line(const char* prompt);

  bool terminal_ = false;  // stdin is a terminal: a paste can be told from typing
  bool editing_ = false;
};

}  // namespace switchyard::cli
