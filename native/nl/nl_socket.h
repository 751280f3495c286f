// NlSocket: a netlink socket created inside one netns (once, on a job
// thread) and then driven from the JS thread: requests are sent with
// sendmsg, replies read non-blocking right away (rtnetlink, ipset and
// nf_tables answer inside sendmsg, so most requests finish synchronously)
// and otherwise through uv_poll on the env's loop. No setns per call.
//
// A request is a buffer of one or more netlink messages (encoded in TS). The
// socket renumbers their sequence numbers, waits for an ACK for every message
// with NLM_F_ACK and for NLMSG_DONE for every dump, and resolves with the
// concatenated data replies, or rejects with a NetError naming the op, the
// errno, the kernel's extended ack and the index of the failing message.
#pragma once
#include <napi.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/error_info.h"
#include "../common/fd.h"
#include "../common/nlmsg.h"

namespace podwire {

class NlSocket : public Napi::ObjectWrap<NlSocket> {
 public:
  static Napi::Function Define(Napi::Env env);
  // Creates the kernel socket in the calling thread's netns.
  static UniqueFd CreateFd(int protocol, ErrorInfo* err);

  explicit NlSocket(const Napi::CallbackInfo& info);
  ~NlSocket() override;

 private:
  struct Pending {
    uint32_t firstSeq = 0;
    uint32_t count = 0;
    std::vector<nl::Expect> expect;
    std::vector<bool> answered;
    size_t remaining = 0;
    std::string op;
    std::string data;
    ErrorInfo err;
    bool interrupted = false;
    bool done = false;
    std::optional<Napi::Promise::Deferred> deferred;
  };

  Napi::Value Request(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value GetFd(const Napi::CallbackInfo& info);
  Napi::Value GetPending(const Napi::CallbackInfo& info);

  // Sends the request; returns the Pending entry (already done if the kernel
  // answered during sendmsg).
  Pending* Submit(Napi::Env env, const Napi::CallbackInfo& info);
  ErrorInfo SendChunk(const uint8_t* data, size_t size);
  void Drain(Napi::Env env);        // read everything available, dispatch
  void Dispatch(const uint8_t* msg, size_t len);
  void FailAll(const ErrorInfo& e);
  void Settle(Napi::Env env);        // resolve/reject finished async requests
  void UpdatePoll();
  void CloseNow(Napi::Env env, const char* why);
  Napi::Value Outcome(Napi::Env env, Pending& p, bool* failed);
  static void OnPoll(uv_poll_t* handle, int status, int events);

  UniqueFd fd_;
  int protocol_ = 0;
  uint32_t nextSeq_ = 1;
  std::deque<std::unique_ptr<Pending>> pending_;
  uv_poll_t* poll_ = nullptr;  // heap: freed in uv_close's callback
  bool polling_ = false;
  bool refd_ = false;
  napi_env env_ = nullptr;
};

}  // namespace podwire
