#pragma once
// A command run on a pseudo-terminal, typed at and read back as a person would: for the tests of
// `switchyard chat`, whose line editing and Ctrl-C need a terminal.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace switchyard::testing {

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
  // Keys typed as a person types them: not in the instant the prompt appears. The line editor
  // prints its prompt before it takes the terminal from the kernel's line mode, and keys that
  // come in between are echoed twice (the kernel's echo, then the editor's).
  void type(const std::string& keys) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    REQUIRE(write(master, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size()));
  }
  int wait_exit() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

}  // namespace switchyard::testing
