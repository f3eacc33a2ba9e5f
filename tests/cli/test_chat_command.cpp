// `switchyard chat` on a terminal: the built-in model (real DeepSeek-V3 tokenizer and chat
// template) run under a pseudo-terminal, typed at and read back as a user would.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "tests/core_test_support.h"
#include "tests/terminal_test_support.h"
#include "tests/test_support.h"

namespace {

using switchyard::testing::Terminal;

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

namespace {

// The conversation chat saved with /save FILE: its messages' roles and contents.
nlohmann::json saved_messages(Terminal& t, const std::string& file, std::size_t& at) {
  at = t.read_until("> ", at);
  t.type("/save " + file + "\r");
  at = t.read_until("saved to " + file, at);
  std::ifstream in(file);
  REQUIRE(in.good());
  return nlohmann::json::parse(in)["messages"];
}

std::vector<std::string> user_contents(const nlohmann::json& messages) {
  std::vector<std::string> out;
  for (const auto& m : messages)
    if (m["role"] == "user") out.push_back(m["content"]);
  return out;
}

std::size_t count_of(const std::string& screen, const std::string& text) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = screen.find(text, at)) != std::string::npos; at += text.size()) ++n;
  return n;
}

}  // namespace

TEST_CASE("chat: Up recalls the last line, a paste is one message, a trailing backslash goes on") {
  const switchyard::core_testing::TempDir dir;
  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "2"});
  std::size_t at = t.read_until("> ", 0);
  answer_after(t, "Hello", at);
  at = t.read_until("> ", at);
  t.type("\x1b[A");  // Up: the line editor brings "Hello" back
  t.type("\r");
  at = t.read_until("]\r\n", at);
  // Two lines in one write, as a terminal delivers a paste.
  at = t.read_until("> ", at);
  t.type("first line\rsecond line\r");
  at = t.read_until("]\r\n", at);
  at = t.read_until("> ", at);
  t.type("one\\\r");
  at = t.read_until("... ", at);
  t.type("two\r");
  at = t.read_until("]\r\n", at);
  const nlohmann::json messages = saved_messages(t, (dir / "chat.json").string(), at);
  CHECK(user_contents(messages) == std::vector<std::string>{"Hello", "Hello", "first line\nsecond line", "one\ntwo"});
  CHECK(messages.size() == 8);  // each user turn answered
  CHECK(t.screen.find("^[[A") == std::string::npos);
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
}

TEST_CASE("chat: /help, /set, /show, /save and /load; a bad command or value is answered, never sent") {
  const switchyard::core_testing::TempDir dir;
  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "2"});
  std::size_t at = t.read_until("> ", 0);
  t.type("/help\r");
  at = t.read_until("/set KEY VALUE", at);
  at = t.read_until("> ", at);
  t.type("/set temperature 0.7\r");
  at = t.read_until("temperature = 0.7", at);
  at = t.read_until("> ", at);
  t.type("/set top-p 7\r");  // out of range: refused with the flag's rule
  at = t.read_until("/set top_p: ", at);
  at = t.read_until("> ", at);
  t.type("/set temprature 1\r");
  at = t.read_until("unknown setting 'temprature' (did you mean 'temperature'?)", at);
  at = t.read_until("> ", at);
  t.type("/hlep\r");
  at = t.read_until("(did you mean '/help'?)", at);
  at = t.read_until("> ", at);
  t.type("/set system Be brief.\r");
  at = t.read_until("(system message set)", at);
  at = t.read_until("> ", at);
  t.type("/show\r");
  at = t.read_until("placement: ", at);
  at = t.read_until("temperature 0.7, top_k 0, top_p 1,", at);
  at = t.read_until("system: 'Be brief.'", at);
  answer_after(t, "Hello", at);
  CHECK(count_of(t.screen, " answer tokens at ") == 1);  // only "Hello" went to the model
  const nlohmann::json saved = saved_messages(t, (dir / "a.json").string(), at);
  REQUIRE(saved.size() == 3);
  CHECK(saved[0]["role"] == "system");
  CHECK(saved[1]["content"] == "Hello");
  // /load puts a saved conversation back; a file that is not one is refused and changes nothing.
  std::ofstream(dir / "other.json") << R"({"messages": [{"role": "user", "content": "Earlier"}, {"role": "assistant", "content": "Yes"}]})";
  std::ofstream(dir / "bad.json") << R"([{"role": "wizard", "content": "x"}])";
  at = t.read_until("> ", at);
  t.type("/load " + (dir / "bad.json").string() + "\r");
  at = t.read_until("not loaded: ", at);
  at = t.read_until("'wizard'", at);
  at = t.read_until("> ", at);
  t.type("/load " + (dir / "other.json").string() + "\r");
  at = t.read_until("(2 message(s) loaded from", at);
  answer_after(t, "And now?", at);
  const nlohmann::json resumed = saved_messages(t, (dir / "b.json").string(), at);
  CHECK(user_contents(resumed) == std::vector<std::string>{"Earlier", "And now?"});
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
}

TEST_CASE("chat: typed UTF-8 arrives whole; a byte that is no character does not end the session") {
  const switchyard::core_testing::TempDir dir;
  Terminal t({SWITCHYARD_BINARY, "chat", "--max_new_tokens", "2"});
  std::size_t at = t.read_until("> ", 0);
  answer_after(t, "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd", at);
  at = t.read_until("> ", at);
  t.type("caf\xe9\r");  // Latin-1's é: the line editor drops it, or chat reports it; either way on
  at = t.read_until("\r\n> ", at) - 2;  // the next prompt
  const nlohmann::json messages = saved_messages(t, (dir / "chat.json").string(), at);
  const std::vector<std::string> sent = user_contents(messages);
  REQUIRE(sent.size() >= 1);
  CHECK(sent[0] == "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd");
  for (const std::string& s : sent) CHECK(switchyard::valid_utf8(s));
  at = t.read_until("> ", at);
  t.type("/exit\r");
  CHECK(t.wait_exit() == 0);
}
