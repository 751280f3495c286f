// JobRunner: runs blocking or netns-switching work on the addon's own
// threads and hands the result back to the JS thread.
//
// Each job gets a fresh std::thread that ends when the job ends, so a thread
// that switched netns and failed to switch back can never be reused; the
// libuv pool is never used for such work (it is shared with fs, dns and
// crypto, and its threads must stay in the process's netns). Completions are
// queued under a mutex and delivered through one uv_async_t on the env's own
// loop, which keeps the runner Worker-safe (no static state, one runner per
// env, torn down by the env's cleanup hook).
#pragma once
#include <napi.h>
#include <uv.h>

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

  explicit JobRunner(napi_env env);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Starts `work` on a new thread; `done` runs on the JS thread afterwards.
  void Run(Work work, Done done);

  // Joins every job thread. Called from the env cleanup hook; afterwards no
  // completion is delivered. `onShutdown` lets jobs abort early (spawn kills
  // its child).
  void Shutdown();
  bool shuttingDown() const { return shuttingDown_; }

  size_t pending() const { return pending_; }

  // The async context every completion (and every uv_poll callback of the
  // addon) runs in: opening a CallbackScope on it makes Node drain the
  // microtask queue afterwards, so resolved promises continue at once.
  Napi::AsyncContext& context() { return ctx_; }

 private:
  struct Finished {
    uint64_t id;
    Done done;
  };
  static void OnAsync(uv_async_t* handle);
  void Drain();

  napi_env env_;
  Napi::AsyncContext ctx_;
  uv_async_t* async_;  // heap: freed by uv_close's callback
  std::mutex mu_;
  std::vector<Finished> finished_;
  std::unordered_map<uint64_t, std::thread> threads_;
  uint64_t nextId_ = 1;
  size_t pending_ = 0;
  bool shuttingDown_ = false;
};

}  // namespace podwire
