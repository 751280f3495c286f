#include "heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace podwire {
namespace {

// heapTrim(): malloc_trim(0) — every arena's free pages are returned with
// MADV_DONTNEED, not only the top of the main heap. Runs on the JS thread: it
// takes each arena's lock in turn, which is short next to the work it follows.
// true when glibc released something.
Napi::Value HeapTrim(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

// heapStats(): glibc's mallinfo2 totals over all arenas, in bytes, or null
// where it does not exist (glibc < 2.33, other libcs).
Napi::Value HeapStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 m = mallinfo2();
  Napi::Object o = Napi::Object::New(env);
  o.Set("arenaBytes", Napi::Number::New(env, static_cast<double>(m.arena)));          // sbrk'd main heap + other arenas
  o.Set("mmappedBytes", Napi::Number::New(env, static_cast<double>(m.hblkhd)));       // large blocks, each its own mmap
  o.Set("inUseBytes", Napi::Number::New(env, static_cast<double>(m.uordblks)));
  o.Set("freeBytes", Napi::Number::New(env, static_cast<double>(m.fordblks)));
  o.Set("releasableBytes", Napi::Number::New(env, static_cast<double>(m.keepcost)));  // at the top of the main heap
  return o;
#else
  return env.Null();
#endif
}

}  // namespace

void RegisterHeap(Napi::Env env, Napi::Object exports) {
  exports.Set("heapTrim", Napi::Function::New<HeapTrim>(env, "heapTrim"));
  exports.Set("heapStats", Napi::Function::New<HeapStats>(env, "heapStats"));
}

}  // namespace podwire
