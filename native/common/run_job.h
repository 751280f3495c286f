// RunJob: the one "run blocking work on a job thread, settle a promise on
// the JS thread" wrapper every async binding uses.
#pragma once
#include <napi.h>

#include <functional>
#include <memory>

#include "addon.h"
#include "error_info.h"

namespace podwire {

// Runs `work` on a job thread (a pooled one, or its own when `dedicated`:
// for work that may block long); settles the returned promise with `value`
// (built on the JS thread) or the ErrorInfo as a NetError. `st` is the job's
// state: it lives until both have run and goes on the JS thread before the
// promise's continuation runs (fds it owns close with it; JobRunner::Drain).
template <typename State>
Napi::Value RunJob(Napi::Env env, std::shared_ptr<State> st, std::function<ErrorInfo(State&)> work,
                   std::function<Napi::Value(Napi::Env, State&)> value, bool dedicated = false) {
  auto deferred = std::make_shared<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
  auto err = std::make_shared<ErrorInfo>();
  Addon::Of(env).jobs.Run([st, err, work] { *err = work(*st); },
                          [st, err, deferred, value](Napi::Env env) {
                            if (err->failed()) deferred->Reject(MakeNetError(env, *err).Value());
                            else deferred->Resolve(value(env, *st));
                          },
                          dedicated);
  return deferred->Promise();
}

}  // namespace podwire
