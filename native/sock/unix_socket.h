// UnixSocket: one non-blocking AF_UNIX socket (SOCK_SEQPACKET or
// SOCK_STREAM: listener, accepted or connected) driven from the JS thread.
// The native side only does non-blocking attempts (accept / send / recv,
// each returning "would block" instead of waiting) and reports readiness
// through one uv_poll on the env's loop; lib/net/seqpacket.ts builds the
// promises, queues and deadlines on top. Received fds are handed to JS as
// numbers the caller then owns.
#pragma once
#include <napi.h>
#include <uv.h>

#include "../common/fd.h"

namespace podwire {

struct UnixsockState;  // per-env: the constructor reference (sock_binding.cc)

class UnixSocket : public Napi::ObjectWrap<UnixSocket> {
 public:
  static Napi::Function Define(Napi::Env env, UnixsockState* state);
  // Wraps `fd` (ownership passes to the new object).
  static Napi::Object Wrap(Napi::Env env, UnixsockState* state, int fd, int type);

  explicit UnixSocket(const Napi::CallbackInfo& info);
  ~UnixSocket() override;

 private:
  Napi::Value Accept(const Napi::CallbackInfo& info);
  Napi::Value Send(const Napi::CallbackInfo& info);
  Napi::Value Recv(const Napi::CallbackInfo& info);
  Napi::Value SoError(const Napi::CallbackInfo& info);
  Napi::Value PeerCredentials(const Napi::CallbackInfo& info);
  Napi::Value Watch(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value GetFd(const Napi::CallbackInfo& info);
  Napi::Value GetClosed(const Napi::CallbackInfo& info);

  void CheckOpen(Napi::Env env, const char* op);
  void StopPoll();
  static void OnPoll(uv_poll_t* handle, int status, int events);

  UnixsockState* state_ = nullptr;
  UniqueFd fd_;
  int type_ = 0;
  uv_poll_t* poll_ = nullptr;  // heap: freed in uv_close's callback
  int events_ = 0;
  bool refd_ = false;
  Napi::FunctionReference cb_;
  napi_env env_ = nullptr;
};

}  // namespace podwire
