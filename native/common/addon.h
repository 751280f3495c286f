// Per-env addon state. Everything mutable lives here (never in statics), so
// the addon can be loaded in several Workers at once. Created in Init, torn
// down by the env cleanup hook.
#pragma once
#include <napi.h>
#include <sys/eventfd.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include "error_info.h"
#include "fd.h"
#include "jobs.h"

namespace podwire {

struct Addon {
  explicit Addon(napi_env env) : jobs(env), cancelFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  Napi::FunctionReference netError;  // the TS NetError class, set by init()
  Napi::FunctionReference nlSocketCtor;
  JobRunner jobs;

  // The receive buffer of every NlSocket of this env: they are read only on
  // the JS thread, one recvmsg at a time, and each reply is copied out before
  // the next read. One per socket would hold the pages every dump touched in
  // each of them (tens of MB with a socket pair per enrolled pod). Allocated
  // on first use, not zero-filled.
  static constexpr size_t kNlRxSize = 1 << 18;
  uint8_t* nlRx() {
    if (!nlRx_) nlRx_.reset(new uint8_t[kNlRxSize]);
    return nlRx_.get();
  }

  // Written once by KillChildren and never read, so it stays readable: every
  // spawn polls it and stops waiting (killing its process group) at once
  // when the env goes away. Outlives the job threads (they are joined in the
  // cleanup hook; the Addon is deleted after it). Invalid if eventfd failed.
  UniqueFd cancelFd;

  // Children (process-group leaders) spawned by job threads; their groups
  // are killed if the env goes away first so that the job threads can be
  // joined. A pid leaves the set before it is reaped, so the group id is
  // never a reused pid.
  std::mutex childMu;
  std::set<pid_t> children;
  bool closing = false;  // under childMu: set by KillChildren; a child registered later is killed at once

  static Addon& Of(Napi::Env env) { return *env.GetInstanceData<Addon>(); }

 private:
  std::unique_ptr<uint8_t[]> nlRx_;
};

// Builds a NetError (the class handed over by init()) from an ErrorInfo.
Napi::Error MakeNetError(Napi::Env env, const ErrorInfo& info);

}  // namespace podwire
