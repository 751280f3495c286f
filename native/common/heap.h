// The C allocator's view of this process: what it holds and a way to hand
// freed pages back to the kernel. glibc keeps freed memory in its arenas
// (the main heap and one per thread group) and returns it only from the top
// of the main heap on its own, so a burst of native work — the agent's
// restart proves and verifies every pod at once — can leave megabytes of
// free but resident pages. Elsewhere (musl, other libcs) both are no-ops.
#pragma once
#include <napi.h>

namespace podwire {
void RegisterHeap(Napi::Env env, Napi::Object exports);
}  // namespace podwire
