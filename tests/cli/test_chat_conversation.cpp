// chat's conversation and slash commands (cli/chat_conversation.h), without a model.
#include <string>

#include <doctest/doctest.h>

#include "cli/chat_conversation.h"

using switchyard::cli::ChatConversation;

TEST_CASE("chat conversation: a command given an argument it does not take is answered, not carried out") {
  ChatConversation c({}, "Be brief.", "model: test");
  c.add("user", "hi");
  std::string reply;
  CHECK(c.command("/clear now", reply) == ChatConversation::Command::handled);
  CHECK(reply.find("/clear takes no argument ('now' was given)") == 0);
  CHECK(c.messages().size() == 2);  // not cleared
  CHECK(c.command("/exit please", reply) == ChatConversation::Command::handled);
  CHECK(c.command("/show x", reply) == ChatConversation::Command::handled);
  CHECK(reply.find("takes no argument") != std::string::npos);
  CHECK(c.command("/clear", reply) == ChatConversation::Command::handled);
  CHECK(c.messages().size() == 1);  // the system message stays
  CHECK(c.command("/exit", reply) == ChatConversation::Command::exit);
  CHECK(c.command("hello", reply) == ChatConversation::Command::none);
}
