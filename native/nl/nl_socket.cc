#include "nl_socket.h"

#include "../common/args.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "../common/addon.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_GET_STRICT_CHK
#define NETLINK_GET_STRICT_CHK 12
#endif

namespace podwire {
namespace {

constexpr int kRcvBuf = 8 << 20;
constexpr int kSndBuf = 4 << 20;
// Between chunks the socket is drained, so at most this many ACKs queue up
// in the receive buffer (each costs ~1 KiB of skb truesize).
constexpr size_t kMaxAcksPerChunk = 1024;
constexpr size_t kMaxChunkBytes = 1 << 20;

void SetBuf(int fd, int forceOpt, int opt, int size) {
  if (setsockopt(fd, SOL_SOCKET, forceOpt, &size, sizeof size) != 0)
    setsockopt(fd, SOL_SOCKET, opt, &size, sizeof size);
}

}  // namespace

UniqueFd NlSocket::CreateFd(int protocol, ErrorInfo* err) {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol));
  if (!fd.valid()) {
    *err = ErrorInfo::Errno(errno, "socket", std::string("netlink socket: ") + std::strerror(errno));
    return {};
  }
  int one = 1;
  // Extended acks carry the kernel's reason; capped acks keep ACKs small;
  // strict checking makes the kernel honour dump filters and reject junk.
  setsockopt(fd.get(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd.get(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  setsockopt(fd.get(), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one);
  SetBuf(fd.get(), SO_RCVBUFFORCE, SO_RCVBUF, kRcvBuf);
  SetBuf(fd.get(), SO_SNDBUFFORCE, SO_SNDBUF, kSndBuf);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *err = ErrorInfo::Errno(errno, "bind", std::string("bind netlink socket: ") + std::strerror(errno));
    return {};
  }
  return fd;
}

Napi::Function NlSocket::Define(Napi::Env env) {
  return DefineClass(env, "NlSocket",
                     {
                         InstanceMethod<&NlSocket::Request>("request"),
                         InstanceMethod<&NlSocket::Close>("close"),
                         InstanceAccessor<&NlSocket::GetFd>("fd"),
                         InstanceAccessor<&NlSocket::GetPending>("pending"),
                     });
}

// new NlSocket(fd, protocol): takes ownership of fd. Only the addon creates
// these (from the result of a socket job), so the fd is never ownerless.
NlSocket::NlSocket(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NlSocket>(info) {
  env_ = info.Env();
  fd_.reset(info[0].As<Napi::Number>().Int32Value());
  protocol_ = info[1].As<Napi::Number>().Int32Value();
}

NlSocket::~NlSocket() {
  if (poll_) {
    uv_poll_stop(poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll_ = nullptr;
  }
}

Napi::Value NlSocket::GetFd(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), fd_.get()); }

Napi::Value NlSocket::GetPending(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(pending_.size()));
}

ErrorInfo NlSocket::SendChunk(const uint8_t* data, size_t size) {
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  for (;;) {
    ssize_t n = sendto(fd_.get(), data, size, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (n >= 0) return {};
    if (errno == EINTR) continue;
    return ErrorInfo::Errno(errno, "sendmsg", std::string("netlink send: ") + std::strerror(errno));
  }
}

// request(buffer, op, atomic): see the header. The buffer's sequence numbers
// are rewritten in place.
NlSocket::Pending* NlSocket::Submit(Napi::Env env, const Napi::CallbackInfo& info) {
  if (!fd_.valid()) throw MakeNetError(env, ErrorInfo::Errno(EBADF, "request", "netlink socket is closed"));
  auto buf = info[0].As<Napi::Buffer<uint8_t>>();
  std::string op = StringArg(env, info[1], "op");
  bool atomic = info.Length() > 2 && info[2].ToBoolean().Value();
  uint8_t* data = buf.Data();
  size_t size = buf.Length();

  std::vector<nl::MsgSpan> spans;
  if (size == 0 || !nl::Split(data, size, &spans))
    throw Napi::TypeError::New(env, "request: malformed netlink message buffer");

  auto p = std::make_unique<Pending>();
  p->op = std::move(op);
  p->firstSeq = nextSeq_;
  p->count = static_cast<uint32_t>(spans.size());
  nextSeq_ += p->count;
  if (nextSeq_ == 0) nextSeq_ = 1;
  nl::Renumber(data, size, p->firstSeq);
  for (const auto& m : spans) {
    nl::Expect e = nl::ExpectFor(nl::Header(data, m));
    p->expect.push_back(e);
    if (e != nl::Expect::kNone) ++p->remaining;
  }
  p->answered.assign(spans.size(), false);
  p->deferred.emplace(Napi::Promise::Deferred::New(env));
  if (p->remaining == 0) p->done = true;  // fire-and-forget (no ACK asked)
  Pending* raw = p.get();
  pending_.push_back(std::move(p));

  // Send in chunks at message boundaries (unless atomic: an nfnetlink batch
  // must arrive in one sendmsg), draining replies between chunks so ACKs
  // never overflow the receive buffer.
  size_t start = 0, acks = 0;
  for (size_t i = 0; i < spans.size() && !raw->err.failed(); ++i) {
    size_t end = spans[i].offset + spans[i].length;
    if (raw->expect[i] != nl::Expect::kNone) ++acks;
    bool last = i + 1 == spans.size();
    bool full = !atomic && (acks >= kMaxAcksPerChunk ||
                            (!last && spans[i + 1].offset + spans[i + 1].length - start > kMaxChunkBytes));
    if (!last && !full) continue;
    size_t chunkEnd = last ? size : spans[i + 1].offset;
    ErrorInfo e = SendChunk(data + start, chunkEnd - start);
    if (e.failed()) {
      e.op = raw->op;
      e.index = static_cast<int>(i);
      raw->err = e;
      raw->done = true;  // nothing more will come for unsent messages
      break;
    }
    Drain(env);
    start = chunkEnd;
    acks = 0;
    (void)end;
  }
  if (!raw->done) Drain(env);
  // nfnetlink processes a batch inside sendmsg, so every reply is queued by
  // now. A batch rejected as a whole (no CAP_NET_ADMIN, a bad BATCH_BEGIN)
  // answers only its first message: waiting for the ACKs would hang.
  if (atomic && !raw->done && raw->err.failed()) raw->done = true;
  return raw;
}

void NlSocket::Drain(Napi::Env env) {
  uint8_t* rx = Addon::Of(env).nlRx();  // shared by the env's sockets (JS thread only)
  for (;;) {
    iovec iov{rx, Addon::kNlRxSize};
    sockaddr_nl from{};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    ssize_t n = recvmsg(fd_.get(), &mh, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // ENOBUFS: the kernel dropped replies; nobody waiting can be answered.
      FailAll(ErrorInfo::Errno(errno, "recvmsg", std::string("netlink receive: ") + std::strerror(errno)));
      break;
    }
    if (mh.msg_flags & MSG_TRUNC) {
      FailAll(ErrorInfo::Errno(EMSGSIZE, "recvmsg", "netlink reply truncated"));
      continue;
    }
    if (from.nl_pid != 0) continue;  // only the kernel talks to us
    std::vector<nl::MsgSpan> spans;
    nl::Split(rx, static_cast<size_t>(n), &spans);
    for (const auto& m : spans) Dispatch(rx + m.offset, m.length);
    // Nobody waits any more: skip the recvmsg that would only say EAGAIN.
    // Anything unsolicited stays queued and is read (and ignored) next time.
    bool waiting = false;
    for (auto& p : pending_) waiting |= !p->done;
    if (!waiting) break;
  }
  UpdatePoll();
}

void NlSocket::Dispatch(const uint8_t* msg, size_t len) {
  nlmsghdr h;
  std::memcpy(&h, msg, sizeof h);
  Pending* p = nullptr;
  for (auto& cand : pending_) {
    if (!cand->done && static_cast<uint32_t>(h.nlmsg_seq - cand->firstSeq) < cand->count) {
      p = cand.get();
      break;
    }
  }
  if (!p) return;  // a late reply for a failed or closed request
  size_t idx = h.nlmsg_seq - p->firstSeq;
  auto answer = [&] {
    if (p->expect[idx] != nl::Expect::kNone && !p->answered[idx]) {
      p->answered[idx] = true;
      if (--p->remaining == 0) p->done = true;
    }
  };
  auto record = [&](const nl::Status& s) {
    if (s.error < 0 && !p->err.failed()) {
      p->err.err = -s.error;
      p->err.op = p->op;
      p->err.extack = s.extackMsg;
      p->err.extackOffset = s.extackOffset;
      p->err.index = static_cast<int>(idx);
      if (s.echo) p->err.echo.assign(reinterpret_cast<const char*>(s.echo), s.echoLen);
      p->err.message = p->op + ": " + (s.error > -4096 ? std::strerror(-s.error) : "error");
      if (!s.extackMsg.empty()) p->err.message += " (" + s.extackMsg + ")";
    }
  };
  if (h.nlmsg_flags & NLM_F_DUMP_INTR) p->interrupted = true;
  switch (h.nlmsg_type) {
    case NLMSG_ERROR: {
      auto s = nl::DecodeError(msg, len);
      if (s) record(*s);
      answer();
      break;
    }
    case NLMSG_DONE:
      record(nl::DecodeDone(msg, len));
      answer();
      break;
    case NLMSG_NOOP:
    case NLMSG_OVERRUN:
      break;
    default:
      p->data.append(reinterpret_cast<const char*>(msg), len);
      p->data.append(NLMSG_ALIGN(len) - len, '\0');
      break;
  }
}

void NlSocket::FailAll(const ErrorInfo& e) {
  for (auto& p : pending_) {
    if (p->done) continue;
    p->err = e;
    if (!p->op.empty()) p->err.op = p->op;
    p->done = true;
  }
}

Napi::Value NlSocket::Outcome(Napi::Env env, Pending& p, bool* failed) {
  *failed = true;
  if (p.err.failed()) {
    return MakeNetError(env, p.err).Value();
  }
  if (p.interrupted) {
    ErrorInfo e = ErrorInfo::Errno(EINTR, p.op, p.op + ": dump interrupted by a concurrent change (NLM_F_DUMP_INTR)");
    e.code = "DUMP_INTERRUPTED";
    Napi::Error err = MakeNetError(env, e);
    err.Set("partial", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t*>(p.data.data()), p.data.size()));
    return err.Value();
  }
  *failed = false;
  if (p.data.empty()) return env.Undefined();
  return Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t*>(p.data.data()), p.data.size());
}

void NlSocket::Settle(Napi::Env env) {
  // Completed requests leave the queue in order.
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = **it;
    if (!p.done) {
      ++it;
      continue;
    }
    auto owned = std::move(*it);
    it = pending_.erase(it);
    bool failed;
    Napi::Value v = Outcome(env, *owned, &failed);
    if (failed) owned->deferred->Reject(v);
    else owned->deferred->Resolve(v);
  }
  UpdatePoll();
}

void NlSocket::UpdatePoll() {
  bool waiting = false;
  for (auto& p : pending_) waiting |= !p->done;
  if (waiting && !refd_) {
    Ref();  // keep the wrapper alive while the kernel owes us replies
    refd_ = true;
  } else if (!waiting && refd_) {
    Unref();
    refd_ = false;
  }
  if (!fd_.valid()) return;
  if (waiting && !polling_) {
    if (!poll_) {
      poll_ = new uv_poll_t;
      uv_loop_t* loop = nullptr;
      napi_get_uv_event_loop(env_, &loop);
      uv_poll_init(loop, poll_, fd_.get());
      poll_->data = this;
    }
    uv_poll_start(poll_, UV_READABLE, &NlSocket::OnPoll);
    polling_ = true;
  } else if (!waiting && polling_) {
    uv_poll_stop(poll_);
    polling_ = false;
  }
}

void NlSocket::OnPoll(uv_poll_t* handle, int status, int) {
  auto* self = static_cast<NlSocket*>(handle->data);
  Napi::Env env(self->env_);
  Napi::HandleScope hs(env);
  Napi::CallbackScope cs(env, Addon::Of(env).jobs.context());
  if (status < 0) self->FailAll(ErrorInfo::Errno(-status, "poll", std::string("netlink poll: ") + uv_strerror(status)));
  else self->Drain(env);
  self->Settle(env);
}

Napi::Value NlSocket::Request(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Pending* p = Submit(env, info);
  Napi::Promise promise = p->deferred->Promise();
  Settle(env);
  return promise;
}

void NlSocket::CloseNow(Napi::Env env, const char* why) {
  if (!fd_.valid()) return;
  ErrorInfo e = ErrorInfo::Errno(ECANCELED, "close", why);
  FailAll(e);
  Settle(env);
  if (poll_) {
    uv_poll_stop(poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll_ = nullptr;
    polling_ = false;
  }
  fd_.reset();
  UpdatePoll();
}

Napi::Value NlSocket::Close(const Napi::CallbackInfo& info) {
  CloseNow(info.Env(), "netlink socket closed with requests pending");
  return info.Env().Undefined();
}

}  // namespace podwire
