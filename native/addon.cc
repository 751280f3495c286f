// podwire native addon: entry point. Builds the per-env state and registers
// each subsystem. C++ exceptions are enabled (node_addon_api_except): a
// Napi::Error thrown anywhere below becomes a JS exception.
#include <napi.h>

#include "common/addon.h"
#include "common/heap.h"
#include "netns/netns_binding.h"
#include "nft/nft_binding.h"
#include "nl/nl_socket.h"
#include "sock/sock_binding.h"

namespace podwire {
namespace {

// init({ NetError }): hands the TS error class to native code, which
// constructs it for every failure (better-sqlite3's pattern).
Napi::Value InitBinding(const Napi::CallbackInfo& info) {
  Napi::Object opts = info[0].As<Napi::Object>();
  Addon::Of(info.Env()).netError = Napi::Persistent(opts.Get("NetError").As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* addon = new Addon(env);
  env.SetInstanceData<Addon>(addon);  // deleted by N-API at env teardown
  env.AddCleanupHook([addon] {
    KillChildren(*addon);
    addon->jobs.Shutdown();
  });
  Napi::Function sock = NlSocket::Define(env);
  addon->nlSocketCtor = Napi::Persistent(sock);
  exports.Set("NlSocket", sock);
  exports.Set("init", Napi::Function::New<InitBinding>(env, "init"));
  exports.Set("platformSupported", Napi::Boolean::New(env, true));
  RegisterNetns(env, exports);
  RegisterSock(env, exports);
  RegisterNft(env, exports);
  RegisterHeap(env, exports);
  return exports;
}

}  // namespace
}  // namespace podwire

static Napi::Object InitPodwire(Napi::Env env, Napi::Object exports) { return podwire::Init(env, exports); }
NODE_API_MODULE(podwire, InitPodwire)
