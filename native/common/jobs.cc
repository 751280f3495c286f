#include "jobs.h"

#include "thread_state.h"

#include <algorithm>

namespace podwire {

JobRunner::JobRunner(napi_env env) : env_(env), ctx_(Napi::Env(env), "podwire"), async_(new uv_async_t) {
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  uv_async_init(loop, async_, &JobRunner::OnAsync);
  async_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));
}

JobRunner::~JobRunner() { Shutdown(); }

void JobRunner::Run(Work work, Done done, bool dedicated) {
  if (pending_++ == 0) uv_ref(reinterpret_cast<uv_handle_t*>(async_));
  std::lock_guard<std::mutex> lock(mu_);
  if (dedicated) {
    Job job{std::move(work), std::move(done)};
    if (dedicated_ < kMaxDedicated) StartDedicated(std::move(job));
    else dedicatedQueue_.push_back(std::move(job));
    return;
  }
  queue_.push_back({std::move(work), std::move(done)});
  if (idle_ == 0 && workers_ < kMaxWorkers) {
    uint64_t id = nextId_++;
    ++workers_;
    threads_.emplace(id, std::thread(&JobRunner::WorkerLoop, this, id));
  } else {
    cv_.notify_one();
  }
}

void JobRunner::StartDedicated(Job job) {
  uint64_t id = nextId_++;
  ++dedicated_;
  dedicatedPeak_ = std::max(dedicatedPeak_, dedicated_);
  threads_.emplace(id, std::thread(&JobRunner::DedicatedLoop, this, id, std::move(job)));
}

// Runs `first`, then queued long jobs while there are any: the thread is
// reused (saving a thread start) unless it is poisoned.
void JobRunner::DedicatedLoop(uint64_t id, Job first) {
  Job job = std::move(first);
  for (;;) {
    job.work();
    job.work = nullptr;  // as in WorkerLoop
    Finish(std::move(job.done));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || dedicatedQueue_.empty() || ThreadPoisoned()) {
      --dedicated_;
      exited_.push_back(id);
      // A poisoned thread hands the next long job to a fresh thread.
      if (!stopping_ && !dedicatedQueue_.empty()) {
        Job next = std::move(dedicatedQueue_.front());
        dedicatedQueue_.pop_front();
        StartDedicated(std::move(next));
      }
      return;
    }
    job = std::move(dedicatedQueue_.front());
    dedicatedQueue_.pop_front();
  }
}

JobRunner::Counts JobRunner::counts() {
  std::lock_guard<std::mutex> lock(mu_);
  return {workers_, dedicated_, dedicatedQueue_.size(), dedicatedPeak_};
}

void JobRunner::WorkerLoop(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (stopping_) break;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job.work();
    job.work = nullptr;  // its captures (a job's state, fds) now belong to `done` alone: see Drain
    Finish(std::move(job.done));
    lock.lock();
    // A thread left in another netns must never run anything again.
    if (ThreadPoisoned()) break;
  }
  --workers_;
  exited_.push_back(id);
  // A job queued while this worker was retiring still needs a thread.
  if (!stopping_ && !queue_.empty() && idle_ == 0 && workers_ < kMaxWorkers) {
    uint64_t next = nextId_++;
    ++workers_;
    threads_.emplace(next, std::thread(&JobRunner::WorkerLoop, this, next));
  }
}

void JobRunner::Finish(Done done) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_.push_back(std::move(done));
  if (!shuttingDown_) uv_async_send(async_);
}

void JobRunner::OnAsync(uv_async_t* handle) { static_cast<JobRunner*>(handle->data)->Drain(); }

void JobRunner::Drain() {
  std::vector<Done> batch;
  std::vector<std::thread> joinable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(finished_);
    for (uint64_t id : exited_) {
      auto it = threads_.find(id);
      if (it == threads_.end()) continue;
      joinable.push_back(std::move(it->second));
      threads_.erase(it);
    }
    exited_.clear();
  }
  for (auto& t : joinable) t.join();  // these threads have returned (or are returning)
  Napi::Env env(env_);
  Napi::HandleScope outer(env);
  Napi::CallbackScope scope(env, ctx_);
  for (auto& done : batch) {
    if (--pending_ == 0) uv_unref(reinterpret_cast<uv_handle_t*>(async_));
    Napi::HandleScope hs(env);
    try {
      done(env);
    } catch (const Napi::Error& e) {
      // A throwing completion must not stop the others.
      napi_fatal_exception(env_, e.Value());
    }
    // Its captures go now, on this thread, before the callback scope closes: a job's state (the
    // fds it owns) is gone by the time the settled promise's continuation runs, never later on
    // a job thread.
    done = nullptr;
  }
}

void JobRunner::Shutdown() {
  if (shuttingDown_) return;
  std::unordered_map<uint64_t, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shuttingDown_ = true;
    stopping_ = true;
    queue_.clear();
    dedicatedQueue_.clear();
    cv_.notify_all();
  }
  // Workers exit at their next wait; dedicated threads when their job ends
  // (the env cleanup hook kills spawned children first).
  for (;;) {
    std::unordered_map<uint64_t, std::thread> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (threads_.empty()) break;
      batch.swap(threads_);
    }
    for (auto& [id, t] : batch) t.join();
  }
  finished_.clear();
  uv_close(reinterpret_cast<uv_handle_t*>(async_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

}  // namespace podwire
