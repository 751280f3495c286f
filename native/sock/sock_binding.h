// N-API surface of the unix-socket subsystem: UnixSocket objects, listen /
// connect / socketpair, fd dup, and the inet sockets a ztunnel-like peer
// opens inside a pod netns (on a job thread) plus their original
// destination.
#pragma once
#include <napi.h>

namespace podwire {

// Per-env state of this subsystem, owned by an env cleanup hook (the Addon
// struct is shared, so this lives beside it rather than in it).
struct UnixsockState {
  Napi::FunctionReference ctor;
};

void RegisterSock(Napi::Env env, Napi::Object exports);

}  // namespace podwire
