// Built on every platform but Linux: the same export names, each throwing
// ENOSYS, so `npm install` succeeds on a laptop and the TS layer can report
// a clear error instead of failing to load.
#include <napi.h>

namespace {

Napi::Value NotSupported(const Napi::CallbackInfo& info) {
  Napi::Error e = Napi::Error::New(info.Env(), "podwire's native addon only works on Linux");
  e.Set("code", Napi::String::New(info.Env(), "ENOSYS"));
  e.Set("errno", Napi::Number::New(info.Env(), 38));
  throw e;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  for (const char* name : {"init", "nsOpen", "nsStat", "fdClose", "nsCreate", "nsRemove", "nsCreateAnonymous", "sysctlSet", "readFiles",
                           "spawn", "nlOpen", "counters", "NlSocket",
                           "UnixSocket", "unixListen", "unixConnect", "unixPair", "fdDup", "inetOpen", "inetOriginalDst",
                           "nftEncode", "nftDecode", "nftRecords", "nftDumpRequest", "heapTrim", "heapStats"})
    exports.Set(name, Napi::Function::New<NotSupported>(env, name));
  exports.Set("platformSupported", Napi::Boolean::New(env, false));
  return exports;
}

}  // namespace

NODE_API_MODULE(podwire, Init)
