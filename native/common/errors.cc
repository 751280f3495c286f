#include <cstring>

#include "addon.h"

namespace podwire {

Napi::Error MakeNetError(Napi::Env env, const ErrorInfo& info) {
  Addon& addon = Addon::Of(env);
  std::string message = info.message;
  if (message.empty()) message = info.op + ": " + (info.err < 4096 ? std::strerror(info.err) : "error");
  Napi::Object details = Napi::Object::New(env);
  details.Set("errno", Napi::Number::New(env, info.err));
  details.Set("op", Napi::String::New(env, info.op));
  if (!info.code.empty()) details.Set("code", Napi::String::New(env, info.code));
  if (!info.extack.empty()) details.Set("extack", Napi::String::New(env, info.extack));
  if (info.extackOffset >= 0) details.Set("extackOffset", Napi::Number::New(env, info.extackOffset));
  if (info.index >= 0) details.Set("index", Napi::Number::New(env, info.index));
  if (!info.echo.empty()) details.Set("echo", Napi::Buffer<char>::Copy(env, info.echo.data(), info.echo.size()));
  if (addon.netError.IsEmpty()) {
    Napi::Error e = Napi::Error::New(env, message);
    e.Set("errno", details.Get("errno"));
    e.Set("op", details.Get("op"));
    return e;
  }
  Napi::Value obj = addon.netError.New({Napi::String::New(env, message), details});
  return Napi::Error(env, obj);
}

}  // namespace podwire
