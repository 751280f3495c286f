// N-API surface of the netns subsystem. Work that switches netns runs on
// the JobRunner's own threads (never the JS thread or the libuv pool).
#include "netns_binding.h"

#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "../common/addon.h"
#include "../common/run_job.h"
#include "../common/args.h"
#include "../nl/nl_socket.h"
#include "netns_ops.h"

namespace podwire {
namespace {

Napi::Object IdObject(Napi::Env env, const netns::NsId& id) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("dev", Napi::Number::New(env, static_cast<double>(id.dev)));
  o.Set("ino", Napi::Number::New(env, static_cast<double>(id.ino)));
  return o;
}

Napi::Value NsOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  netns::NsId id;
  ErrorInfo err;
  UniqueFd fd = netns::OpenNetns(StringArg(env, info[0], "netns path"), &id, &err);
  if (!fd.valid()) throw MakeNetError(env, err);
  Napi::Object o = IdObject(env, id);
  o.Set("fd", Napi::Number::New(env, fd.release()));  // ownership passes to the TS Netns
  return o;
}

Napi::Value NsStat(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  netns::NsId id;
  ErrorInfo err;
  if (!netns::StatNetns(info[0].As<Napi::Number>().Int32Value(), &id, &err)) throw MakeNetError(env, err);
  return IdObject(env, id);
}

Napi::Value FdClose(const Napi::CallbackInfo& info) {
  UniqueFd(info[0].As<Napi::Number>().Int32Value()).reset();
  return info.Env().Undefined();
}

Napi::Value NsCreate(const Napi::CallbackInfo& info) {
  struct S {
    std::string dir, name;
  };
  Napi::Env env = info.Env();
  auto st = std::make_shared<S>(S{StringArg(env, info[0], "netns dir"), StringArg(env, info[1], "netns name")});
  return RunJob<S>(
      info.Env(), st,
      [](S& s) {
        bool restored;
        return netns::CreateNetns(s.dir, s.name, &restored);
      },
      [](Napi::Env env, S&) { return env.Undefined(); });
}

// nsCreateAnonymous() → Promise<{fd, dev, ino}>: a netns with no name (see netns_ops.h).
Napi::Value NsCreateAnonymous(const Napi::CallbackInfo& info) {
  struct S {
    netns::NsId id;
    UniqueFd fd;
  };
  auto st = std::make_shared<S>();
  return RunJob<S>(
      info.Env(), st,
      [](S& s) {
        ErrorInfo err;
        bool restored;
        s.fd = netns::CreateAnonymousNetns(&s.id, &err, &restored);
        return err;
      },
      [](Napi::Env env, S& s) -> Napi::Value {
        Napi::Object o = IdObject(env, s.id);
        o.Set("fd", Napi::Number::New(env, s.fd.release()));  // ownership passes to the TS Netns
        return o;
      });
}

Napi::Value NsRemove(const Napi::CallbackInfo& info) {
  ErrorInfo err = netns::RemoveNetns(StringArg(info.Env(), info[0], "netns path"));
  if (err.failed()) throw MakeNetError(info.Env(), err);
  return info.Env().Undefined();
}

// sysctlSet(fd, path, value): /proc/sys/net resolves against the netns of
// the writing *thread*, so this runs switched (reads go through readFiles).
Napi::Value SysctlSet(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct S {
    UniqueFd ns;  // our own dup: see NetnsFdArg
    std::string path, value;
  };
  auto st = std::make_shared<S>(S{NetnsFdArg(env, info[0]), StringArg(env, info[1], "sysctl path"),
                                  StringArg(env, info[2], "sysctl value")});
  return RunJob<S>(
      env, st,
      [](S& s) {
        bool restored;  // s.ns invalid (-1): this netns, no switch
        return netns::RunInNetns(s.ns.get(), [&] { return netns::WriteFile(s.path, s.value); }, &restored);
      },
      [](Napi::Env env, S&) { return env.Undefined(); });
}

// readFiles(fd, paths) → Promise<Array<string | null>>: several files read
// inside the netns by one job thread (one switch); a missing file is null.
Napi::Value ReadFiles(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct S {
    UniqueFd ns;  // our own dup: see NetnsFdArg
    std::vector<std::string> paths;
    std::vector<std::string> out;
    std::vector<bool> missing;
  };
  auto st = std::make_shared<S>();
  st->ns = NetnsFdArg(env, info[0]);
  st->paths = StringArrayArg(env, info[1], "paths");
  return RunJob<S>(
      env, st,
      [](S& s) {
        auto read = [&] {
          for (const auto& p : s.paths) {
            std::string v;
            ErrorInfo e = netns::ReadFile(p, &v);
            if (e.failed() && e.err != ENOENT) return e;
            s.out.push_back(std::move(v));
            s.missing.push_back(e.failed());
          }
          return ErrorInfo{};
        };
        bool restored;
        return netns::RunInNetns(s.ns.get(), read, &restored);
      },
      [](Napi::Env env, S& s) -> Napi::Value {
        Napi::Array a = Napi::Array::New(env, s.out.size());
        for (size_t i = 0; i < s.out.size(); ++i)
          a.Set(static_cast<uint32_t>(i), s.missing[i] ? env.Null() : Napi::String::New(env, s.out[i]).As<Napi::Value>());
        return a;
      });
}

// spawn(fd, argv, env, cwd, stdin | null, timeoutMs) → Promise<result>
Napi::Value Spawn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  struct S {
    UniqueFd ns;  // our own dup: see NetnsFdArg
    netns::SpawnOptions opts;
    netns::SpawnResult result;
    Addon* addon;
  };
  auto st = std::make_shared<S>();
  st->ns = NetnsFdArg(env, info[0]);
  st->opts.nsFd = st->ns.get();  // -1 when invalid: this netns
  st->opts.argv = StringArrayArg(env, info[1], "argv");
  st->opts.env = StringArrayArg(env, info[2], "env");
  if (!info[3].IsUndefined() && !info[3].IsNull()) st->opts.cwd = StringArg(env, info[3], "cwd");
  if (info[4].IsBuffer()) {
    auto b = info[4].As<Napi::Buffer<char>>();
    st->opts.stdinData.assign(b.Data(), b.Length());
    st->opts.hasStdin = true;
  }
  st->opts.timeoutMs = TimeoutMsArg(env, info[5], "timeoutMs");
  st->addon = &Addon::Of(env);
  st->opts.cancelFd = st->addon->cancelFd.get();
  return RunJob<S>(
      env, st,
      [](S& s) {
        bool restored;
        Addon* a = s.addon;
        return netns::Spawn(
            s.opts, &s.result, &restored,
            [a](pid_t pid) {
              std::lock_guard<std::mutex> lock(a->childMu);
              a->children.insert(pid);
              if (a->closing) kill(-pid, SIGKILL);  // the env is going away: don't wait for it
            },
            [a](pid_t pid) {  // before the reap: the pgid is still this child's
              std::lock_guard<std::mutex> lock(a->childMu);
              a->children.erase(pid);
            });
      },
      [](Napi::Env env, S& s) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("code", s.result.signal ? env.Null() : Napi::Number::New(env, s.result.code));
        o.Set("signal", Napi::Number::New(env, s.result.signal));
        o.Set("timedOut", Napi::Boolean::New(env, s.result.timedOut));
        o.Set("stdout", Napi::Buffer<char>::Copy(env, s.result.out.data(), s.result.out.size()));
        o.Set("stderr", Napi::Buffer<char>::Copy(env, s.result.err.data(), s.result.err.size()));
        return o;
      },
      /*dedicated=*/true);
}

// nlOpen(nsFd, protocols) → Promise<NlSocket[]>: netlink sockets created
// inside the netns (-1: this one) in one job; each stays bound to that netns
// for its life and is used from the JS thread from then on.
Napi::Value NlOpen(const Napi::CallbackInfo& info) {
  struct S {
    UniqueFd ns;  // our own dup (invalid: this netns); see NetnsFdArg
    std::vector<int> protocols;
    std::vector<UniqueFd> fds;
  };
  auto st = std::make_shared<S>();
  st->ns = NetnsFdArg(info.Env(), info[0]);
  auto arr = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < arr.Length(); ++i) st->protocols.push_back(arr.Get(i).As<Napi::Number>().Int32Value());
  return RunJob<S>(
      info.Env(), st,
      [](S& s) {
        auto create = [&]() -> ErrorInfo {
          for (int p : s.protocols) {
            ErrorInfo e;
            UniqueFd fd = NlSocket::CreateFd(p, &e);
            if (!fd.valid()) return e;  // the ones made so far close with the state
            s.fds.push_back(std::move(fd));
          }
          return {};
        };
        bool restored;
        return netns::RunInNetns(s.ns.get(), create, &restored);
      },
      [](Napi::Env env, S& s) -> Napi::Value {
        Napi::Function ctor = Addon::Of(env).nlSocketCtor.Value();
        Napi::Array out = Napi::Array::New(env, s.fds.size());
        for (size_t i = 0; i < s.fds.size(); ++i)  // each NlSocket owns its fd from here
          out.Set(static_cast<uint32_t>(i), ctor.New({Napi::Number::New(env, s.fds[i].release()), Napi::Number::New(env, s.protocols[i])}));
        return out;
      });
}

Napi::Value Counters(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Addon& a = Addon::Of(env);
  Napi::Object o = Napi::Object::New(env);
  o.Set("jobsPending", Napi::Number::New(env, static_cast<double>(a.jobs.pending())));
  JobRunner::Counts c = a.jobs.counts();
  o.Set("workers", Napi::Number::New(env, static_cast<double>(c.workers)));
  o.Set("dedicatedThreads", Napi::Number::New(env, static_cast<double>(c.dedicated)));
  o.Set("dedicatedQueued", Napi::Number::New(env, static_cast<double>(c.dedicatedQueued)));
  o.Set("dedicatedPeak", Napi::Number::New(env, static_cast<double>(c.dedicatedPeak)));
  o.Set("dedicatedMax", Napi::Number::New(env, static_cast<double>(JobRunner::kMaxDedicated)));
  std::lock_guard<std::mutex> lock(a.childMu);
  o.Set("children", Napi::Number::New(env, static_cast<double>(a.children.size())));
  return o;
}

}  // namespace

void KillChildren(Addon& addon) {
  std::lock_guard<std::mutex> lock(addon.childMu);
  addon.closing = true;
  // Wake every spawn waiting in poll (it kills its own group and returns).
  if (addon.cancelFd.valid()) {
    uint64_t one = 1;
    if (write(addon.cancelFd.get(), &one, sizeof one) < 0) {
      // EAGAIN only if the counter is saturated: it is readable either way.
    }
  }
  // Each pid is an unreaped group leader (see Addon::children): the group id is ours.
  for (pid_t pid : addon.children) kill(-pid, SIGKILL);
}

void RegisterNetns(Napi::Env env, Napi::Object exports) {
  exports.Set("nsOpen", Napi::Function::New<NsOpen>(env, "nsOpen"));
  exports.Set("nsStat", Napi::Function::New<NsStat>(env, "nsStat"));
  exports.Set("fdClose", Napi::Function::New<FdClose>(env, "fdClose"));
  exports.Set("nsCreate", Napi::Function::New<NsCreate>(env, "nsCreate"));
  exports.Set("nsRemove", Napi::Function::New<NsRemove>(env, "nsRemove"));
  exports.Set("nsCreateAnonymous", Napi::Function::New<NsCreateAnonymous>(env, "nsCreateAnonymous"));
  exports.Set("sysctlSet", Napi::Function::New<SysctlSet>(env, "sysctlSet"));
  exports.Set("readFiles", Napi::Function::New<ReadFiles>(env, "readFiles"));
  exports.Set("spawn", Napi::Function::New<Spawn>(env, "spawn"));
  exports.Set("nlOpen", Napi::Function::New<NlOpen>(env, "nlOpen"));
  exports.Set("counters", Napi::Function::New<Counters>(env, "counters"));
}

}  // namespace podwire
