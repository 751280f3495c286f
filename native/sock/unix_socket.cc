#include "unix_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "../common/addon.h"
#include "unix_ops.h"
#include "sock_binding.h"

namespace podwire {
namespace {

constexpr int kReadable = 1;
constexpr int kWritable = 2;
constexpr size_t kMaxRecvBytes = 16 << 20;
constexpr size_t kMaxRecvFds = 253;  // SCM_MAX_FD

}  // namespace

Napi::Function UnixSocket::Define(Napi::Env env, UnixsockState* state) {
  return DefineClass(env, "UnixSocket",
                     {
                         InstanceMethod<&UnixSocket::Accept>("accept"),
                         InstanceMethod<&UnixSocket::Send>("send"),
                         InstanceMethod<&UnixSocket::Recv>("recv"),
                         InstanceMethod<&UnixSocket::SoError>("soError"),
                         InstanceMethod<&UnixSocket::PeerCredentials>("peerCredentials"),
                         InstanceMethod<&UnixSocket::Watch>("watch"),
                         InstanceMethod<&UnixSocket::Close>("close"),
                         InstanceAccessor<&UnixSocket::GetFd>("fd"),
                         InstanceAccessor<&UnixSocket::GetClosed>("closed"),
                     },
                     state);
}

Napi::Object UnixSocket::Wrap(Napi::Env env, UnixsockState* state, int fd, int type) {
  UniqueFd owned(fd);  // closed here if the constructor throws
  Napi::Object o = state->ctor.New({Napi::Number::New(env, owned.get()), Napi::Number::New(env, type)});
  owned.release();
  return o;
}

// new UnixSocket(fd, type): takes ownership of fd. Only the addon creates
// these, from sockets it made itself.
UnixSocket::UnixSocket(const Napi::CallbackInfo& info) : Napi::ObjectWrap<UnixSocket>(info) {
  env_ = info.Env();
  state_ = static_cast<UnixsockState*>(info.Data());
  fd_.reset(info[0].As<Napi::Number>().Int32Value());
  type_ = info[1].As<Napi::Number>().Int32Value();
}

UnixSocket::~UnixSocket() { StopPoll(); }

void UnixSocket::CheckOpen(Napi::Env env, const char* op) {
  if (!fd_.valid()) throw MakeNetError(env, ErrorInfo::Errno(EBADF, op, std::string(op) + ": socket is closed"));
}

Napi::Value UnixSocket::GetFd(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), fd_.get()); }
Napi::Value UnixSocket::GetClosed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), !fd_.valid());
}

// accept() → UnixSocket | null (nothing pending).
Napi::Value UnixSocket::Accept(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "accept");
  for (;;) {
    int fd = accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return Wrap(env, state_, fd, type_);
    // ECONNABORTED: the client gave up while queued; take the next one.
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return env.Null();
    int e = errno;
    throw MakeNetError(env, ErrorInfo::Errno(e, "accept", std::string("accept: ") + std::strerror(e)));
  }
}

// send(buffer, fds?) → bytes sent, or -1 when the socket would block.
Napi::Value UnixSocket::Send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "sendmsg");
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  std::vector<int> fds;
  if (info.Length() > 1 && info[1].IsArray()) {
    Napi::Array a = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) fds.push_back(a.Get(i).As<Napi::Number>().Int32Value());
  }
  ErrorInfo err;
  ssize_t n = sock::SendRecord(fd_.get(), buf.Data(), buf.Length(), fds, &err);
  if (n == -2) throw MakeNetError(env, err);
  return Napi::Number::New(env, static_cast<double>(n));
}

// recv(maxBytes, maxFds) → { data, fds } | null (would block). data of
// length 0 is EOF. A truncated record (MSG_TRUNC / MSG_CTRUNC) is consumed,
// its fds closed, and reported as a NetError (code ERR_MSG_TRUNC /
// ERR_MSG_CTRUNC, errno EMSGSIZE, `size` = the record's real size).
Napi::Value UnixSocket::Recv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "recvmsg");
  size_t maxBytes = info[0].As<Napi::Number>().Uint32Value();
  size_t maxFds = info.Length() > 1 ? info[1].As<Napi::Number>().Uint32Value() : 0;
  if (maxBytes == 0 || maxBytes > kMaxRecvBytes) throw Napi::RangeError::New(env, "recv: maxBytes out of range");
  if (maxFds > kMaxRecvFds) throw Napi::RangeError::New(env, "recv: maxFds out of range");
  sock::Received r;
  ErrorInfo err;
  int rc = sock::RecvRecord(fd_.get(), type_ == SOCK_STREAM, maxBytes, maxFds, &r, &err);
  if (rc < 0) throw MakeNetError(env, err);
  if (rc == 0) return env.Null();
  if (r.truncated || r.ctruncated) {
    sock::CloseAll(&r.fds);
    ErrorInfo e = ErrorInfo::Errno(EMSGSIZE, "recvmsg",
                                   r.truncated ? "record of " + std::to_string(r.fullSize) + " bytes exceeds the " +
                                                     std::to_string(maxBytes) + "-byte buffer (MSG_TRUNC)"
                                               : "more file descriptors than the control buffer holds (MSG_CTRUNC)");
    e.code = r.truncated ? "ERR_MSG_TRUNC" : "ERR_MSG_CTRUNC";
    Napi::Error ex = MakeNetError(env, e);
    ex.Set("size", Napi::Number::New(env, static_cast<double>(r.fullSize)));
    throw ex;
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("data", Napi::Buffer<uint8_t>::Copy(env, r.data.data(), r.data.size()));
  Napi::Array fds = Napi::Array::New(env, r.fds.size());
  for (size_t i = 0; i < r.fds.size(); ++i) fds.Set(static_cast<uint32_t>(i), Napi::Number::New(env, r.fds[i]));
  o.Set("fds", fds);
  return o;
}

Napi::Value UnixSocket::SoError(const Napi::CallbackInfo& info) {
  CheckOpen(info.Env(), "getsockopt");
  return Napi::Number::New(info.Env(), sock::SocketError(fd_.get()));
}

Napi::Value UnixSocket::PeerCredentials(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CheckOpen(env, "getsockopt");
  sock::PeerCred c;
  ErrorInfo err;
  if (!sock::PeerCredentials(fd_.get(), &c, &err)) throw MakeNetError(env, err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("pid", Napi::Number::New(env, c.pid));
  o.Set("uid", Napi::Number::New(env, c.uid));
  o.Set("gid", Napi::Number::New(env, c.gid));
  return o;
}

// watch(events, callback?): events is a mask (1 readable, 2 writable); 0
// stops watching. The callback gets (errno, events) on the JS thread. While
// watching, the object is kept alive and the loop stays referenced.
Napi::Value UnixSocket::Watch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int events = info[0].As<Napi::Number>().Int32Value() & (kReadable | kWritable);
  if (info.Length() > 1 && info[1].IsFunction()) cb_ = Napi::Persistent(info[1].As<Napi::Function>());
  if (events == 0 || !fd_.valid()) {
    if (poll_ && events_ != 0) uv_poll_stop(poll_);
    events_ = 0;
    if (refd_) {
      refd_ = false;
      Unref();
    }
    return env.Undefined();
  }
  if (cb_.IsEmpty()) throw Napi::TypeError::New(env, "watch: no callback");
  if (!poll_) {
    poll_ = new uv_poll_t;
    uv_loop_t* loop = nullptr;
    napi_get_uv_event_loop(env, &loop);
    int rc = uv_poll_init(loop, poll_, fd_.get());
    if (rc != 0) {
      delete poll_;
      poll_ = nullptr;
      throw MakeNetError(env, ErrorInfo::Errno(-rc, "poll", std::string("uv_poll_init: ") + uv_strerror(rc)));
    }
    poll_->data = this;
  }
  if (events != events_) {
    int uv = (events & kReadable ? UV_READABLE : 0) | (events & kWritable ? UV_WRITABLE : 0);
    uv_poll_start(poll_, uv, &UnixSocket::OnPoll);
    events_ = events;
  }
  if (!refd_) {
    refd_ = true;
    Ref();
  }
  return env.Undefined();
}

void UnixSocket::OnPoll(uv_poll_t* handle, int status, int events) {
  auto* self = static_cast<UnixSocket*>(handle->data);
  if (self->cb_.IsEmpty()) return;
  Napi::Env env(self->env_);
  Napi::HandleScope hs(env);
  Napi::CallbackScope cs(env, Addon::Of(env).jobs.context());
  int mask = (events & UV_READABLE ? kReadable : 0) | (events & UV_WRITABLE ? kWritable : 0);
  // Errors (EBADF, ...) are reported as readable+writable so that the next
  // attempt surfaces the socket's own error.
  if (status < 0) mask = self->events_;
  try {
    self->cb_.Call({Napi::Number::New(env, status < 0 ? -status : 0), Napi::Number::New(env, mask)});
  } catch (const Napi::Error& e) {
    napi_fatal_exception(env, e.Value());
  }
}

void UnixSocket::StopPoll() {
  if (!poll_) return;
  uv_poll_stop(poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
  poll_ = nullptr;
  events_ = 0;
}

Napi::Value UnixSocket::Close(const Napi::CallbackInfo& info) {
  StopPoll();  // before the fd goes: epoll must not watch a closed number
  fd_.reset();
  if (refd_) {
    refd_ = false;
    Unref();
  }
  return info.Env().Undefined();
}

}  // namespace podwire
