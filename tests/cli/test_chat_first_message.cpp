// `switchyard chat -p TEXT` / `-f FILE`, as llama.cpp's conversation mode has them: the first user
// turn, answered before anything is read, then the chat goes on (or ends with the input); and
// `-sys` / `--system-prompt`, the system message. On the built-in model, through the binary.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "tests/core_test_support.h"
#include "tests/terminal_test_support.h"
#include "tests/test_support.h"

namespace {

using switchyard::core_testing::contains;
using switchyard::core_testing::TempDir;
using switchyard::testing::run_switchyard_with_env;
using switchyard::testing::Terminal;

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(part, at)) != std::string::npos; at += part.size()) ++n;
  return n;
}

// The answer to the turn MESSAGE in a chat's output (lines ending in `newline`): from the end of
// the line that shows the message to the stats line.
std::string answer_to(const std::string& output, const std::string& message, const std::string& newline) {
  const std::string echo = message + newline;
  const std::size_t start = output.find(echo);
  REQUIRE_MESSAGE(start != std::string::npos, output);
  const std::size_t stats = output.find(newline + "[", start + echo.size());
  REQUIRE_MESSAGE(stats != std::string::npos, output);
  return output.substr(start + echo.size(), stats - start - echo.size());
}

// The messages of the conversation that `chat ARGUMENTS` saves when its input is "/save FILE".
nlohmann::json saved_after(const std::string& arguments, const TempDir& dir) {
  const std::string file = (dir / "saved.json").string();
  std::filesystem::remove(file);
  std::ofstream(dir / "input.txt") << "/save " << file << "\n";
  const auto chat = run_switchyard_with_env("", "chat -n 2 " + arguments + " < " + (dir / "input.txt").string(), true);
  REQUIRE_MESSAGE(chat.exit_code == 0, chat.output);
  std::ifstream in(file);
  REQUIRE_MESSAGE(in.good(), chat.output);
  return nlohmann::json::parse(in)["messages"];
}

}  // namespace

TEST_CASE("chat -p: the first turn is answered before the prompt, as if typed, and the chat goes on") {
  // The answer to "Hello" typed at a fresh chat.
  std::string typed;
  {
    Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "6"});
    std::size_t at = t.read_until("> ", 0);
    t.type("Hello\r");
    at = t.read_until("]\r\n", at);
    typed = answer_to(t.screen, "Hello", "\r\n");
    t.type("/exit\r");
    CHECK(t.wait_exit() == 0);
  }
  CHECK_FALSE(typed.empty());

  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "6", "-p", "Hello"});
  std::size_t at = t.read_until("> Hello\r\n", 0);
  at = t.read_until("]\r\n", at);
  CHECK(answer_to(t.screen, "Hello", "\r\n") == typed);
  at = t.read_until("> ", at);  // then the prompt: the chat goes on
  t.type("Again\r");
  at = t.read_until("Again\r\n", at);
  at = t.read_until("]\r\n", at);
  at = t.read_until("> ", at);
  const TempDir dir;
  const std::string file = (dir / "chat.json").string();
  t.type("/save " + file + "\r");
  at = t.read_until("saved to " + file, at);
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
  std::ifstream in(file);
  REQUIRE(in.good());
  const nlohmann::json messages = nlohmann::json::parse(in)["messages"];
  REQUIRE(messages.size() == 4);
  CHECK(messages[0]["role"] == "user");
  CHECK(messages[0]["content"] == "Hello");
  CHECK(messages[2]["content"] == "Again");

  // With the input at its end, the chat ends after the first answer, and answers the same.
  const auto piped = run_switchyard_with_env("", "chat --max_new_tokens 6 -p Hello < /dev/null", true);
  INFO(piped.output);
  CHECK(piped.exit_code == 0);
  CHECK(count_of(piped.output, " answer tokens at ") == 1);
  CHECK(answer_to(piped.output, "Hello", "\n") == switchyard::replace_all(typed, "\r\n", "\n"));
}

TEST_CASE("chat -f: the first turn from a file, less its final newline; a file that cannot be one is refused before the model loads") {
  const TempDir dir;
  std::ofstream(dir / "hello.txt") << "Hello\n";
  const auto from_file = run_switchyard_with_env("", "chat -n 6 -f " + (dir / "hello.txt").string() + " < /dev/null", true);
  const auto from_flag = run_switchyard_with_env("", "chat -n 6 --prompt Hello < /dev/null", true);
  REQUIRE_MESSAGE(from_file.exit_code == 0, from_file.output);
  REQUIRE(from_flag.exit_code == 0);
  CHECK(answer_to(from_file.output, "Hello", "\n") == answer_to(from_flag.output, "Hello", "\n"));
  CHECK(count_of(from_file.output, " answer tokens at ") == 1);

  std::ofstream(dir / "empty.txt") << "\n";
  std::ofstream(dir / "latin1.txt") << "caf\xe9";
  std::filesystem::create_directory(dir / "folder");
  struct Refused {
    std::string arguments, says;
  };
  const std::vector<Refused> refused = {
      {"-f " + (dir / "none.txt").string(), "none.txt"},
      {"--file " + (dir / "empty.txt").string(), "is empty"},
      {"-f " + (dir / "folder").string(), "folder"},
      {"-f " + (dir / "latin1.txt").string(), "not UTF-8"},
      {"-p \"$(printf 'caf\\351')\"", "not UTF-8"},
      {"-p Hello -f " + (dir / "hello.txt").string(), "--file"},
  };
  for (const Refused& r : refused) {
    INFO(r.arguments);
    const auto chat = run_switchyard_with_env("", "chat -n 2 " + r.arguments + " < /dev/null", true);
    CHECK(chat.exit_code == 2);
    CHECK(contains(chat.output, r.says));
    CHECK_FALSE(contains(chat.output, "load duration"));
  }
}

TEST_CASE("chat: -sys, --system-prompt and --system give the system message; -p's text is sent, never a command") {
  const TempDir dir;
  for (const char* flag : {"-sys", "--system-prompt", "--system"}) {
    INFO(flag);
    const nlohmann::json messages = saved_after(std::string(flag) + " 'Be brief.' -p Hello", dir);
    REQUIRE(messages.size() == 3);
    CHECK(messages[0]["role"] == "system");
    CHECK(messages[0]["content"] == "Be brief.");
    CHECK(messages[1]["role"] == "user");
    CHECK(messages[1]["content"] == "Hello");
    CHECK(messages[2]["role"] == "assistant");
  }
  const nlohmann::json help = saved_after("-p /help", dir);
  REQUIRE(help.size() == 2);
  CHECK(help[0]["content"] == "/help");
}
