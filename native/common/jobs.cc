#include "jobs.h"

namespace podwire {

JobRunner::JobRunner(napi_env env) : env_(env), ctx_(Napi::Env(env), "podwire"), async_(new uv_async_t) {
  uv_loop_t* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  uv_async_init(loop, async_, &JobRunner::OnAsync);
  async_->data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(async_));
}

JobRunner::~JobRunner() { Shutdown(); }

void JobRunner::Run(Work work, Done done) {
  uint64_t id = nextId_++;
  if (pending_++ == 0) uv_ref(reinterpret_cast<uv_handle_t*>(async_));
  std::thread t([this, id, work = std::move(work), done = std::move(done)]() mutable {
    work();
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back({id, std::move(done)});
    if (!shuttingDown_) uv_async_send(async_);
  });
  threads_.emplace(id, std::move(t));
}

void JobRunner::OnAsync(uv_async_t* handle) { static_cast<JobRunner*>(handle->data)->Drain(); }

void JobRunner::Drain() {
  std::vector<Finished> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(finished_);
  }
  Napi::Env env(env_);
  Napi::HandleScope outer(env);
  Napi::CallbackScope scope(env, ctx_);
  for (auto& f : batch) {
    auto it = threads_.find(f.id);
    if (it != threads_.end()) {
      it->second.join();  // the thread has already returned from work()
      threads_.erase(it);
    }
    if (--pending_ == 0) uv_unref(reinterpret_cast<uv_handle_t*>(async_));
    Napi::HandleScope scope(env);
    try {
      f.done(env);
    } catch (const Napi::Error& e) {
      // A throwing completion must not stop the others.
      napi_fatal_exception(env_, e.Value());
    }
  }
}

void JobRunner::Shutdown() {
  if (shuttingDown_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shuttingDown_ = true;
  }
  for (auto& [id, t] : threads_) t.join();
  threads_.clear();
  finished_.clear();
  uv_close(reinterpret_cast<uv_handle_t*>(async_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

}  // namespace podwire
