// JobRunner: runs blocking or netns-switching work on the addon's own
// threads and hands the result back to the JS thread.
//
// Short jobs (socket creation inside a netns, /proc reads, mounts) run on a
// small pool of worker threads that are reused as long as they are clean: a
// job that could not switch its thread back to the original netns marks the
// thread poisoned (thread_state.h) and the worker ends after that job — a
// poisoned thread is never reused. Long jobs (waiting for a spawned child)
// get a dedicated thread of their own so they never hold up the pool; at
// most kMaxDedicated of those run at once, further long jobs wait in a FIFO
// and run on a dedicated thread as soon as one is free. The
// libuv pool is never used for any of this (it is shared with fs, dns and
// crypto, and its threads must stay in the process's netns).
//
// Completions are queued under a mutex and delivered through one uv_async_t
// on the env's own loop, inside a callback scope, which keeps the runner
// Worker-safe: no static state, one runner per env, torn down by the env's
// cleanup hook.
#pragma once
#include <napi.h>
#include <uv.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace podwire {

class JobRunner {
 public:
  using Work = std::function<void()>;                 // runs on a job thread
  using Done = std::function<void(Napi::Env)>;        // runs on the JS thread

  /** At most this many pooled workers; more short jobs wait in the queue. */
  static constexpr size_t kMaxWorkers = 4;
  /** At most this many dedicated (long-job) threads; more long jobs queue, FIFO. */
  static constexpr size_t kMaxDedicated = 16;

  explicit JobRunner(napi_env env);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Queues `work` for a pooled worker (or a fresh thread of its own when
  // `dedicated`); `done` runs on the JS thread afterwards.
  void Run(Work work, Done done, bool dedicated = false);

  // Stops the workers and joins every job thread. Called from the env
  // cleanup hook; afterwards no completion is delivered.
  void Shutdown();
  bool shuttingDown() const { return shuttingDown_; }

  size_t pending() const { return pending_; }

  struct Counts {
    size_t workers;           // pooled worker threads alive
    size_t dedicated;         // dedicated threads running a long job
    size_t dedicatedQueued;   // long jobs waiting for a dedicated thread
    size_t dedicatedPeak;     // most dedicated threads at once so far
  };
  Counts counts();

  // The async context every completion (and every uv_poll callback of the
  // addon) runs in: opening a CallbackScope on it makes Node drain the
  // microtask queue afterwards, so resolved promises continue at once.
  Napi::AsyncContext& context() { return ctx_; }

 private:
  struct Job {
    Work work;
    Done done;
  };
  static void OnAsync(uv_async_t* handle);
  void Drain();
  void WorkerLoop(uint64_t id);
  void DedicatedLoop(uint64_t id, Job first);
  void StartDedicated(Job job);  // under mu_
  void Finish(Done done);  // job thread: queue the completion, wake the loop

  napi_env env_;
  Napi::AsyncContext ctx_;
  uv_async_t* async_;  // heap: freed by uv_close's callback
  size_t pending_ = 0;  // JS thread only
  bool shuttingDown_ = false;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<Done> finished_;
  std::unordered_map<uint64_t, std::thread> threads_;  // workers and dedicated threads
  std::vector<uint64_t> exited_;  // threads that returned and can be joined
  std::deque<Job> dedicatedQueue_;  // long jobs waiting for a dedicated thread
  size_t dedicated_ = 0;
  size_t dedicatedPeak_ = 0;
  size_t workers_ = 0;
  size_t idle_ = 0;
  uint64_t nextId_ = 1;
  bool stopping_ = false;
};

}  // namespace podwire
