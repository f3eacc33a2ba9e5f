// `switchyard chat` on a terminal: the built-in model (real DeepSeek-V3 tokenizer and chat
// template) run under a pseudo-terminal, typed at and read back as a user would.
#include <doctest/doctest.h>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/test_support.h"

namespace {

// A child process on the slave side of a pty; the test holds the master.
struct Terminal {
  int master = -1;
  pid_t pid = -1;
  std::string screen;  // everything the child wrote

  explicit Terminal(const std::vector<std::string>& args) {
    pid = forkpty(&master, nullptr, nullptr, nullptr);
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    close(master);
  }
  // Reads until `text` appears after `from` in the screen (or 60 s); returns where it ends.
  std::size_t read_until(const std::string& text, std::size_t from) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      const std::size_t at = screen.find(text, from);
      if (at != std::string::npos) return at + text.size();
      if (std::chrono::steady_clock::now() > deadline) FAIL("no '" << text << "' on the screen:\n" << screen);
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(master, buffer, sizeof buffer);
      if (n <= 0) FAIL("the chat ended before '" << text << "':\n" << screen);
      screen.append(buffer, static_cast<std::size_t>(n));
    }
  }
  void type(const std::string& keys) { REQUIRE(write(master, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size())); }
  int wait_exit() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// The answer typed after `line`: from the end of the echoed line to the stats line.
std::string answer_after(Terminal& t, const std::string& line, std::size_t& at) {
  t.type(line + "\r");  // Enter, as a terminal sends it
  const std::size_t start = t.read_until(line + "\r\n", at);
  const std::size_t stats = t.read_until("\r\n[", start) - 3;
  at = t.read_until("]\r\n", stats);
  return t.screen.substr(start, stats - start);
}

}  // namespace

TEST_CASE("chat: answers on a terminal with the stats line; /clear forgets the conversation; /exit leaves") {
  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "6"});
  std::size_t at = t.read_until("> ", 0);
  const std::string first = answer_after(t, "Hello", at);
  CHECK_FALSE(first.empty());
  CHECK(t.screen.find(" 6 answer tokens at ") != std::string::npos);
  // The same words again, after the first exchange: the template sees the history.
  at = t.read_until("> ", at);
  const std::string second = answer_after(t, "Hello", at);
  at = t.read_until("> ", at);
  t.type("/clear\r");
  at = t.read_until("(conversation cleared)", at);
  at = t.read_until("> ", at);
  CHECK(answer_after(t, "Hello", at) == first);  // a fresh conversation answers as the first did
  CHECK(second != first);
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
}

TEST_CASE("chat: Ctrl-C stops a long answer and the chat goes on") {
  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "3900", "--max_context", "4096"});
  std::size_t at = t.read_until("> ", 0);
  t.type("Tell me everything\r");
  at = t.read_until("everything\r\n", at);
  t.read_until(" ", at + 8);  // some of the answer is on the screen
  t.type("\x03");              // Ctrl-C: SIGINT to the foreground process
  at = t.read_until("; stopped]", at);
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
}
