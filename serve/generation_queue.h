#pragma once
// One generation at a time, first come first served: a bounded queue of jobs and the loop that
// runs them. The loop runs on the thread that built the model (run_worker), so the model's CUDA
// streams and its OpenMP thread team stay that thread's; the HTTP threads only submit jobs and
// read their text.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace switchyard::serve {

// A job's two sides: the worker pushes text and ends it; the submitter waits for the text and may
// cancel (its client gone), which the worker sees at its next push. A job the queue's stop cuts
// short fails with 503, so that its client can tell an answer cut short from a whole one.
class Job {
 public:
  explicit Job(std::function<void(Job&)> work) : work_(std::move(work)) {}

  // Worker side. push returns false once the job is cancelled.
  bool push(std::string_view text);
  // The end: the first of finish and fail counts, later calls do nothing. The queue finishes a job
  // whose work returned without either.
  void finish();
  void fail(std::string error, int status);  // an HTTP status for it (500: a fault of ours)

  // Submitter side.
  struct Update {
    std::string text;      // pushed since the previous wait
    bool done = false;     // finish or fail was called (text holds the rest)
    std::string error;     // fail's message; "" when it finished
    int status = 0;        // fail's status
  };
  // Returns as soon as there is text or the job ended, or after `timeout` (an empty update).
  Update wait(std::chrono::milliseconds timeout);
  void cancel();
  bool cancelled() const;
  // Whether the worker has started it (a queued job has not).
  bool started() const;
  // Returns true as soon as the job has started or ended, false after `timeout`.
  bool wait_started(std::chrono::milliseconds timeout);

 private:
  friend class GenerationQueue;
  std::function<void(Job&)> work_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_;
  bool started_ = false, done_ = false, cancelled_ = false;
  bool stopping_ = false;  // the queue's stop cancelled it; a push refused since then cut its answer short
  bool cut_short_ = false;
  std::string error_;
  int status_ = 0;
};

class GenerationQueue {
 public:
  // `max_waiting`: jobs that may wait behind the running one; more is "full".
  explicit GenerationQueue(std::size_t max_waiting) : max_waiting_(max_waiting) {}

  // The job, queued; nullptr when the queue is full (or stopped). Cancelled jobs leave the queue.
  std::shared_ptr<Job> submit(std::function<void(Job&)> work);
  // Runs jobs in order until stop(); a job that throws fails with status 500 and the loop goes on.
  void run_worker();
  // Ends run_worker after the running job, which is cancelled and, when that cut its answer short
  // (a push refused), fails with 503; queued jobs fail with 503.
  void stop();
  std::size_t waiting() const;
  bool stopped() const;

 private:
  const std::size_t max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::shared_ptr<Job> running_;
  bool stopped_ = false;
};

}  // namespace switchyard::serve
