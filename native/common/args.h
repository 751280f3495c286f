// Argument conversion shared by every binding, so each rule is written once:
// strings never carry NUL bytes into C APIs (open("a\0b") would act on "a"),
// netns fds are dup'ed at call time so the job owns its own reference, and
// millisecond timeouts fit poll()'s int.
#pragma once
#include <napi.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../netns/netns_ops.h"
#include "addon.h"
#include "fd.h"

namespace podwire {

// A JS string as std::string; TypeError when it is not a string or contains
// '\0' (every C API downstream would silently truncate at it).
inline std::string StringArg(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsString()) throw Napi::TypeError::New(env, std::string(what) + " must be a string");
  std::string s = v.As<Napi::String>().Utf8Value();
  if (s.find('\0') != std::string::npos) throw Napi::TypeError::New(env, std::string(what) + " must not contain NUL bytes");
  return s;
}

// An array of strings, each checked as StringArg.
inline std::vector<std::string> StringArrayArg(Napi::Env env, const Napi::Value& v, const char* what) {
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(what) + " must be an array of strings");
  Napi::Array a = v.As<Napi::Array>();
  std::vector<std::string> out;
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(StringArg(env, a.Get(i), what));
  return out;
}

// A netns fd argument for work that runs later on a job thread. -1 means
// "this netns" (returns an invalid UniqueFd). Anything else is dup'ed now,
// on the JS thread, into a UniqueFd the job state owns: JS may close its fd
// the moment the call returns and the number may be reused by another netns
// before the job runs; the dup keeps the job in the namespace it was given.
// A negative, closed or non-netns fd is a NetError EBADF.
inline UniqueFd NetnsFdArg(Napi::Env env, const Napi::Value& v) {
  if (!v.IsNumber()) throw Napi::TypeError::New(env, "netns fd must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (d == -1) return {};
  ErrorInfo err;
  UniqueFd fd = (std::trunc(d) == d && d >= 0 && d <= INT_MAX)
                    ? netns::DupNetnsFd(static_cast<int>(d), &err)
                    : netns::DupNetnsFd(-2, &err);
  if (!fd.valid()) throw MakeNetError(env, err);
  return fd;
}

// A timeout in ms: undefined/null → 0 (none); otherwise an integer in
// [0, 2^31-1] (poll() takes an int), else RangeError.
inline int64_t TimeoutMsArg(Napi::Env env, const Napi::Value& v, const char* what) {
  if (v.IsUndefined() || v.IsNull()) return 0;
  if (!v.IsNumber()) throw Napi::TypeError::New(env, std::string(what) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::trunc(d) != d || d < 0 || d > INT_MAX)
    throw Napi::RangeError::New(env, std::string(what) + " must be an integer from 0 to 2147483647");
  return static_cast<int64_t>(d);
}

}  // namespace podwire
