#pragma once
#include <napi.h>

namespace podwire {
struct Addon;
void RegisterNetns(Napi::Env env, Napi::Object exports);
// Kills children still running (env teardown), so job threads can be joined.
void KillChildren(Addon& addon);
}  // namespace podwire
