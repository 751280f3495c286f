#include "sock_binding.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "../common/addon.h"
#include "../common/args.h"
#include "../common/run_job.h"
#include "../netns/netns_ops.h"
#include "inet_ops.h"
#include "unix_ops.h"
#include "unix_socket.h"

namespace podwire {
namespace {

UnixsockState* StateOf(const Napi::CallbackInfo& info) { return static_cast<UnixsockState*>(info.Data()); }

int SockType(Napi::Env env, const Napi::Value& v) {
  int t = v.As<Napi::Number>().Int32Value();
  if (t != SOCK_SEQPACKET && t != SOCK_STREAM) throw Napi::TypeError::New(env, "socket type must be SOCK_SEQPACKET or SOCK_STREAM");
  return t;
}

// unixListen(name, type, mode, backlog) → UnixSocket
Napi::Value UnixListen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  sock::ListenOptions opts;
  std::string name = StringArg(env, info[0], "socket name");
  opts.type = SockType(env, info[1]);
  opts.mode = info[2].As<Napi::Number>().Int32Value();
  opts.backlog = info[3].As<Napi::Number>().Int32Value();
  ErrorInfo err;
  UniqueFd fd = sock::Listen(name, opts, &err);
  if (!fd.valid()) throw MakeNetError(env, err);
  return UnixSocket::Wrap(env, StateOf(info), fd.release(), opts.type);
}

// unixConnect(name, type) → { socket, inProgress }
Napi::Value UnixConnect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name = StringArg(env, info[0], "socket name");
  int type = SockType(env, info[1]);
  bool inProgress;
  ErrorInfo err;
  UniqueFd fd = sock::Connect(name, type, &inProgress, &err);
  if (!fd.valid()) throw MakeNetError(env, err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("socket", UnixSocket::Wrap(env, StateOf(info), fd.release(), type));
  o.Set("inProgress", Napi::Boolean::New(env, inProgress));
  return o;
}

// unixPair(type) → [UnixSocket, UnixSocket]
Napi::Value UnixPair(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int type = SockType(env, info[0]);
  int sv[2];
  if (socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    int e = errno;
    throw MakeNetError(env, ErrorInfo::Errno(e, "socketpair", std::string("socketpair: ") + std::strerror(e)));
  }
  UniqueFd b(sv[1]);
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, UnixSocket::Wrap(env, StateOf(info), sv[0], type));
  out.Set(1u, UnixSocket::Wrap(env, StateOf(info), b.release(), type));
  return out;
}

// fdDup(fd) → a close-on-exec duplicate the caller owns.
Napi::Value FdDup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd = fcntl(info[0].As<Napi::Number>().Int32Value(), F_DUPFD_CLOEXEC, 3);
  if (fd < 0) {
    int e = errno;
    throw MakeNetError(env, ErrorInfo::Errno(e, "dup", std::string("dup: ") + std::strerror(e)));
  }
  return Napi::Number::New(env, fd);
}

sock::InetSpec SpecFrom(Napi::Env env, const Napi::Object& o) {
  sock::InetSpec s;
  s.udp = o.Get("udp").ToBoolean().Value();
  s.address = StringArg(env, o.Get("address"), "address");
  s.port = o.Get("port").As<Napi::Number>().Int32Value();
  if (o.Has("mark")) s.mark = o.Get("mark").As<Napi::Number>().Uint32Value();
  s.reusePort = o.Get("reusePort").ToBoolean().Value();
  s.transparent = o.Get("transparent").ToBoolean().Value();
  s.optional = o.Get("optional").ToBoolean().Value();
  if (o.Has("bind")) s.bind = o.Get("bind").ToBoolean().Value();
  if (o.Has("backlog")) s.backlog = o.Get("backlog").As<Napi::Number>().Int32Value();
  return s;
}

// inetOpen(nsFd, specs) → Promise<Array<{ fd: number | null, transparent }>>.
// The sockets are created by a job thread that entered the netns (sockets
// stay in the netns they were created in); nsFd -1 means this netns.
Napi::Value InetOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct S {
    UniqueFd ns;  // our own dup (invalid: this netns); see NetnsFdArg
    std::vector<sock::InetSpec> specs;
    std::vector<sock::InetOpened> opened;
  };
  auto st = std::make_shared<S>();
  st->ns = NetnsFdArg(env, info[0]);
  Napi::Array a = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) st->specs.push_back(SpecFrom(env, a.Get(i).As<Napi::Object>()));
  return RunJob<S>(
      env, st,
      [](S& s) -> ErrorInfo {
        bool restored;  // s.ns invalid (-1): this netns, no switch
        ErrorInfo err = netns::RunInNetns(s.ns.get(), [&] {
          ErrorInfo e;
          sock::OpenInetSockets(s.specs, &s.opened, &e);
          return e;
        }, &restored);
        if (err.failed()) s.opened.clear();
        return err;
      },
      [](Napi::Env env, S& s) -> Napi::Value {
        Napi::Array out = Napi::Array::New(env, s.opened.size());
        for (size_t i = 0; i < s.opened.size(); ++i) {
          Napi::Object o = Napi::Object::New(env);
          auto& one = s.opened[i];
          o.Set("fd", one.fd.valid() ? Napi::Value(Napi::Number::New(env, one.fd.release())) : env.Null());
          o.Set("transparent", Napi::Boolean::New(env, one.transparent));
          out.Set(static_cast<uint32_t>(i), o);
        }
        return out;
      });
}

Napi::Object AddrObject(Napi::Env env, const sock::SockAddr& a) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", Napi::Number::New(env, a.family));
  o.Set("address", Napi::String::New(env, a.address));
  o.Set("port", Napi::Number::New(env, a.port));
  return o;
}

// inetOriginalDst(fd) → { family, address, port, redirected }
Napi::Value InetOriginalDst(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  sock::SockAddr a;
  bool redirected;
  ErrorInfo err;
  if (!sock::OriginalDst(info[0].As<Napi::Number>().Int32Value(), &a, &redirected, &err))
    throw MakeNetError(env, err);
  Napi::Object o = AddrObject(env, a);
  o.Set("redirected", Napi::Boolean::New(env, redirected));
  return o;
}

}  // namespace

void RegisterSock(Napi::Env env, Napi::Object exports) {
  auto* state = new UnixsockState;
  env.AddCleanupHook([state] { delete state; });
  state->ctor = Napi::Persistent(UnixSocket::Define(env, state));
  exports.Set("UnixSocket", state->ctor.Value());
  auto fn = [&](const char* name, Napi::Value (*f)(const Napi::CallbackInfo&)) {
    exports.Set(name, Napi::Function::New(env, f, name, state));
  };
  fn("unixListen", UnixListen);
  fn("unixConnect", UnixConnect);
  fn("unixPair", UnixPair);
  fn("fdDup", FdDup);
  fn("inetOpen", InetOpen);
  fn("inetOriginalDst", InetOriginalDst);
}

}  // namespace podwire
