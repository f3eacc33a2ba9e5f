#include "serve/generation_queue.h"

#include <algorithm>
#include <exception>

namespace switchyard::serve {

namespace {
constexpr const char* kShutdownMessage = "the server is shutting down";
}  // namespace

bool Job::push(std::string_view text) {
  std::lock_guard lock(mutex_);
  if (cancelled_) {
    cut_short_ = cut_short_ || stopping_;
    return false;
  }
  pending_.append(text);
  changed_.notify_all();
  return true;
}

void Job::finish() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  changed_.notify_all();
}

void Job::fail(std::string error, int status) {
  std::lock_guard lock(mutex_);
  if (done_) return;
  done_ = true;
  error_ = std::move(error);
  status_ = status;
  changed_.notify_all();
}

Job::Update Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  Update u;
  u.text.swap(pending_);
  u.done = done_;
  u.error = error_;
  u.status = status_;
  return u;
}

void Job::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool Job::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

bool Job::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

bool Job::wait_started(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return started_ || done_; });
}

std::shared_ptr<Job> GenerationQueue::submit(std::function<void(Job&)> work) {
  std::lock_guard lock(mutex_);
  if (stopped_) return nullptr;
  std::erase_if(queue_, [](const std::shared_ptr<Job>& j) { return j->cancelled(); });
  if (queue_.size() >= max_waiting_) return nullptr;
  queue_.push_back(std::make_shared<Job>(std::move(work)));
  wake_.notify_all();
  return queue_.back();
}

void GenerationQueue::run_worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
      if (stopped_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (job->cancelled()) {
        job->fail("cancelled", 499);
        continue;
      }
      running_ = job;
    }
    {
      std::lock_guard job_lock(job->mutex_);
      job->started_ = true;
      job->changed_.notify_all();
    }
    try {
      job->work_(*job);
    } catch (const std::exception& e) {
      job->fail(e.what(), 500);
    } catch (...) {
      job->fail("unknown error", 500);
    }
    bool cut_short = false;
    {
      std::lock_guard job_lock(job->mutex_);
      cut_short = job->cut_short_;
    }
    if (cut_short) job->fail(std::string(kShutdownMessage) + "; the answer was cut short", 503);
    job->finish();  // a no-op where the work ended it
    std::lock_guard lock(mutex_);
    running_.reset();
  }
  std::lock_guard lock(mutex_);
  for (const std::shared_ptr<Job>& j : queue_) j->fail(std::string(kShutdownMessage) + "; retry later", 503);
  queue_.clear();
}

void GenerationQueue::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  if (running_) {
    std::lock_guard job_lock(running_->mutex_);
    running_->stopping_ = true;
    running_->cancelled_ = true;
  }
  wake_.notify_all();
}

std::size_t GenerationQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(queue_.begin(), queue_.end(), [](const std::shared_ptr<Job>& j) { return !j->cancelled(); }));
}

bool GenerationQueue::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

}  // namespace switchyard::serve
