// The generation queue: one job at a time in arrival order, a bounded wait list, cancelled jobs
// leaving it, text handed from the worker to the waiting side, and a stop that fails the rest.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "serve/generation_queue.h"

using namespace switchyard::serve;
using namespace std::chrono_literals;

namespace {

// Collects a job's text until it ends.
std::string drain(Job& job, Job::Update* last = nullptr) {
  std::string text;
  for (;;) {
    Job::Update u = job.wait(1000ms);
    text += u.text;
    if (u.done) {
      if (last) *last = u;
      return text;
    }
  }
}

}  // namespace

TEST_CASE("generation queue: jobs run one at a time, first come first served, their text reaching the waiter") {
  GenerationQueue queue(8);
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 6; ++i)
    jobs.push_back(queue.submit([&, i](Job& job) {
      most = std::max(most.load(), ++running);
      order.push_back(i);
      for (int k = 0; k < 3; ++k) job.push(std::to_string(i) + ":" + std::to_string(k) + " ");
      std::this_thread::sleep_for(2ms);
      --running;
    }));
  for (const auto& j : jobs) REQUIRE(j);
  std::thread worker([&] { queue.run_worker(); });
  for (int i = 0; i < 6; ++i) CHECK(drain(*jobs[i]) == std::to_string(i) + ":0 " + std::to_string(i) + ":1 " + std::to_string(i) + ":2 ");
  queue.stop();
  worker.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(most == 1);
}

TEST_CASE("generation queue: full is refused, a cancelled job frees its place, a throw fails only its job") {
  GenerationQueue queue(2);
  std::atomic<bool> release{false};
  auto blocker = queue.submit([&](Job& job) {
    job.push("started");
    while (!release) std::this_thread::sleep_for(1ms);
  });
  std::thread worker([&] { queue.run_worker(); });
  REQUIRE(blocker->wait(2000ms).text == "started");  // running: it no longer counts as waiting
  auto a = queue.submit([](Job& job) { job.push("a"); });
  auto b = queue.submit([](Job&) { throw std::runtime_error("broken"); });
  REQUIRE(a);
  REQUIRE(b);
  CHECK(queue.waiting() == 2);
  CHECK_FALSE(queue.submit([](Job&) {}));  // full
  a->cancel();
  CHECK(queue.waiting() == 1);
  auto c = queue.submit([](Job& job) { job.push("c"); });
  REQUIRE(c);  // a's place
  release = true;
  Job::Update end;
  drain(*b, &end);
  CHECK(end.status == 500);
  CHECK(end.error == "broken");
  CHECK(drain(*c, &end) == "c");
  CHECK(end.error.empty());
  // The cancelled job never ran: push refuses it.
  CHECK_FALSE(a->push("late"));
  queue.stop();
  worker.join();
}

TEST_CASE("generation queue: stop cancels the running job and fails the waiting ones with 503; the cut-short one too") {
  GenerationQueue queue(4);
  std::atomic<bool> saw_cancel{false};
  auto running = queue.submit([&](Job& job) {
    while (job.push(".")) std::this_thread::sleep_for(1ms);
    saw_cancel = true;
  });
  auto waiting = queue.submit([](Job& job) { job.push("never"); });
  std::thread worker([&] { queue.run_worker(); });
  REQUIRE_FALSE(running->wait(2000ms).text.empty());
  queue.stop();
  worker.join();
  CHECK(saw_cancel);
  Job::Update end;
  drain(*running, &end);
  CHECK(end.status == 503);  // its answer was cut short: not a whole one
  CHECK(end.error.find("cut short") != std::string::npos);
  CHECK(drain(*waiting, &end).empty());
  CHECK(end.status == 503);
  CHECK_FALSE(queue.submit([](Job&) {}));
}

TEST_CASE("generation queue: a job that pushed its last text before the stop ends whole; wait_started wakes at the start") {
  GenerationQueue queue(2);
  std::atomic<bool> stopped{false};
  auto job = queue.submit([&](Job& j) {
    j.push("all of it");
    while (!stopped) std::this_thread::sleep_for(1ms);  // done generating, still returning when the stop comes
  });
  CHECK_FALSE(job->wait_started(10ms));
  std::thread worker([&] { queue.run_worker(); });
  CHECK(job->wait_started(2000ms));
  REQUIRE(job->wait(2000ms).text == "all of it");
  queue.stop();
  stopped = true;
  worker.join();
  Job::Update end;
  drain(*job, &end);
  CHECK(end.error.empty());
}
