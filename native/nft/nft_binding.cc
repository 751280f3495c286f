// nftEncode(commands) → { batch, msgCommand }: the IR built by
// lib/net/nft/lower.ts (sent by lib/net/nft/batch.ts) as one nfnetlink batch. nftDecode(buffer) → objects:
// a batch or a dump read back. nftDumpRequest(...) → one dump request.
#include "nft_binding.h"

#include <cmath>
#include <memory>

#include "../common/addon.h"
#include "../common/args.h"
#include "nft_decode.h"
#include "nft_encode.h"

namespace podwire {
namespace {

using nft::Bytes;

uint32_t U32(const Napi::Object& o, const char* k, uint32_t dflt = 0) {
  Napi::Value v = o.Get(k);
  return v.IsNumber() ? v.As<Napi::Number>().Uint32Value() : dflt;
}

// Names and comments go into NUL-terminated netlink strings: a NUL inside
// would silently cut them, so it is a TypeError (StringArg).
std::string Str(const Napi::Object& o, const char* k) {
  Napi::Value v = o.Get(k);
  return v.IsString() ? StringArg(o.Env(), v, k) : std::string();
}

std::optional<std::string> OptStr(const Napi::Object& o, const char* k) {
  Napi::Value v = o.Get(k);
  if (!v.IsString()) return std::nullopt;
  return StringArg(o.Env(), v, k);
}

Bytes Buf(const Napi::Object& o, const char* k) {
  Napi::Value v = o.Get(k);
  if (!v.IsTypedArray()) return {};
  auto a = v.As<Napi::Uint8Array>();
  return Bytes(a.Data(), a.Data() + a.ByteLength());
}

uint64_t U64(const Napi::Object& o, const char* k) {
  Napi::Value v = o.Get(k);
  if (v.IsBigInt()) {
    bool lossless;
    return v.As<Napi::BigInt>().Uint64Value(&lossless);
  }
  return v.IsNumber() ? static_cast<uint64_t>(v.As<Napi::Number>().Int64Value()) : 0;
}

// An nft set/element timeout in ms: a u64 kernel attribute, not a wait, so
// it may exceed poll()'s int range (nft accepts e.g. 30d), but it must be a
// non-negative integer: a negative one would wrap to ~584 million years.
uint64_t DurationMs(const Napi::Object& o, const char* k) {
  Napi::Value v = o.Get(k);
  if (v.IsBigInt()) {
    bool lossless;
    int64_t i = v.As<Napi::BigInt>().Int64Value(&lossless);
    if (lossless && i >= 0) return static_cast<uint64_t>(i);
  } else if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (std::isfinite(d) && std::trunc(d) == d && d >= 0 && d <= 9007199254740991.0) return static_cast<uint64_t>(d);
  } else if (v.IsUndefined() || v.IsNull()) {
    return 0;
  }
  throw Napi::RangeError::New(o.Env(), std::string("nftEncode: ") + k + " must be a non-negative integer (ms)");
}

nft::Expr ToExpr(const Napi::Object& o) {
  nft::Expr e;
  e.type = Str(o, "type");
  e.key = Str(o, "key");
  e.dreg = U32(o, "dreg");
  e.sreg = U32(o, "sreg");
  e.base = Str(o, "base");
  e.offset = U32(o, "offset");
  e.len = U32(o, "len");
  e.data = Buf(o, "data");
  e.data2 = Buf(o, "data2");
  e.mask = Buf(o, "mask");
  e.xorv = Buf(o, "xor");
  e.chain = Str(o, "chain");
  e.set = Str(o, "set");
  e.setId = U32(o, "setId");
  e.flags = U32(o, "flags");
  e.family = U32(o, "family");
  e.regAddr = U32(o, "regAddr");
  e.regPort = U32(o, "regPort");
  return e;
}

const char* const kOps[] = {"newtable", "deltable", "flushtable", "newchain", "delchain", "flushchain",
                            "newrule",  "newset",   "delset",     "flushset", "newelem",  "delelem"};

nft::Command ToCommand(Napi::Env env, const Napi::Object& o) {
  nft::Command c;
  std::string op = Str(o, "op");
  bool found = false;
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (op == kOps[i]) {
      c.op = static_cast<nft::Op>(i);
      found = true;
    }
  if (!found) throw Napi::TypeError::New(env, "nftEncode: unknown op " + op);
  c.family = static_cast<uint8_t>(U32(o, "family"));
  c.excl = o.Get("excl").ToBoolean();
  c.table = Str(o, "table");
  c.name = Str(o, "name");
  c.comment = OptStr(o, "comment");
  c.tableFlags = U32(o, "tableFlags");
  c.base = o.Get("base").ToBoolean();
  c.chainType = Str(o, "chainType");
  c.hook = U32(o, "hook");
  Napi::Value prio = o.Get("priority");
  c.priority = prio.IsNumber() ? prio.As<Napi::Number>().Int32Value() : 0;
  if (o.Get("policy").IsNumber()) c.policy = U32(o, "policy");
  c.device = Str(o, "device");
  Napi::Value exprs = o.Get("exprs");
  if (exprs.IsArray()) {
    auto arr = exprs.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); ++i) c.exprs.push_back(ToExpr(arr.Get(i).As<Napi::Object>()));
  }
  c.append = o.Get("append").IsBoolean() ? o.Get("append").ToBoolean().Value() : true;
  c.position = U64(o, "position");
  c.ruleId = U32(o, "ruleId");
  c.positionId = U32(o, "positionId");
  c.setFlags = U32(o, "setFlags");
  c.keyType = U32(o, "keyType");
  c.keyLen = U32(o, "keyLen");
  c.setId = U32(o, "setId");
  c.size = U32(o, "size");
  c.timeoutMs = DurationMs(o, "timeoutMs");
  Napi::Value elems = o.Get("elems");
  if (elems.IsArray()) {
    auto arr = elems.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      Napi::Object e = arr.Get(i).As<Napi::Object>();
      nft::Elem el;
      el.key = Buf(e, "key");
      el.comment = OptStr(e, "comment");
      el.timeoutMs = DurationMs(e, "timeoutMs");
      c.elems.push_back(std::move(el));
    }
  }
  return c;
}

Napi::Value NftEncode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray()) throw Napi::TypeError::New(env, "nftEncode: commands must be an array");
  auto arr = info[0].As<Napi::Array>();
  std::vector<nft::Command> cmds;
  cmds.reserve(arr.Length());
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value v = arr.Get(i);
    if (!v.IsObject()) throw Napi::TypeError::New(env, "nftEncode: command " + std::to_string(i) + " is not an object");
    cmds.push_back(ToCommand(env, v.As<Napi::Object>()));
  }
  bool ackEach = !(info.Length() > 1 && info[1].IsObject() && info[1].As<Napi::Object>().Get("ackEach").IsBoolean() &&
                   !info[1].As<Napi::Object>().Get("ackEach").ToBoolean().Value());
  std::vector<uint8_t> out;
  std::vector<int> msgCommand;
  std::string error;
  if (!nft::EncodeBatch(cmds, &out, &msgCommand, &error, ackEach)) {
    Napi::TypeError e = Napi::TypeError::New(env, "nftEncode: " + error);
    e.Set("code", Napi::String::New(env, "NFT_ENCODE"));  // callers branch on this, not on the text
    throw e;
  }
  Napi::Object r = Napi::Object::New(env);
  r.Set("batch", Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size()));
  auto idx = Napi::Int32Array::New(env, msgCommand.size());
  for (size_t i = 0; i < msgCommand.size(); ++i) idx[i] = msgCommand[i];
  r.Set("msgCommand", idx);
  return r;
}

Napi::Value Bin(Napi::Env env, const Bytes& b) { return Napi::Buffer<uint8_t>::Copy(env, b.data(), b.size()); }

Napi::Value NftDecode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) throw Napi::TypeError::New(env, "nftDecode: expects a Buffer");
  auto buf = info[0].As<Napi::Uint8Array>();
  std::vector<nft::Object> objs;
  bool ok = nft::Decode(buf.Data(), buf.ByteLength(), &objs);
  if (!ok) throw Napi::RangeError::New(env, "nftDecode: malformed netlink messages");
  Napi::Array out = Napi::Array::New(env, objs.size());
  for (size_t i = 0; i < objs.size(); ++i) {
    const nft::Object& o = objs[i];
    Napi::Object j = Napi::Object::New(env);
    j.Set("kind", o.kind);
    j.Set("nlFlags", o.nlFlags);
    j.Set("family", o.family);
    j.Set("table", o.table);
    j.Set("name", o.name);
    j.Set("handle", Napi::BigInt::New(env, o.handle));
    if (o.comment) j.Set("comment", *o.comment);
    j.Set("flags", o.flags);
    if (o.base) {
      j.Set("base", true);
      j.Set("chainType", o.chainType);
      j.Set("hook", o.hook);
      j.Set("priority", o.priority);
      if (!o.device.empty()) j.Set("device", o.device);
    }
    if (o.policy) j.Set("policy", *o.policy);
    if (o.kind == "rule" || o.kind == "delrule") {
      Napi::Array ex = Napi::Array::New(env, o.exprs.size());
      for (size_t k = 0; k < o.exprs.size(); ++k) ex.Set(k, o.exprs[k]);
      j.Set("exprs", ex);
      j.Set("position", Napi::BigInt::New(env, o.position));
      j.Set("ruleId", o.ruleId);
      j.Set("positionId", o.positionId);
    }
    if (o.kind == "set" || o.kind == "delset") {
      j.Set("keyType", o.keyType);
      j.Set("keyLen", o.keyLen);
      j.Set("size", o.size);
    }
    j.Set("setId", o.setId);
    if (o.kind == "elem" || o.kind == "delelem") {
      Napi::Array el = Napi::Array::New(env, o.elems.size());
      for (size_t k = 0; k < o.elems.size(); ++k) {
        Napi::Object e = Napi::Object::New(env);
        e.Set("key", Bin(env, o.elems[k].key));
        if (o.elems[k].comment) e.Set("comment", *o.elems[k].comment);
        el.Set(k, e);
      }
      j.Set("elems", el);
    }
    out.Set(i, j);
  }
  return out;
}

// nftRecords(buffer) → string: nft::VerifyRecords of the decoded messages
// (lib/net/nft/records.ts splits it).
Napi::Value NftRecords(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) throw Napi::TypeError::New(env, "nftRecords: expects a Buffer");
  auto buf = info[0].As<Napi::Uint8Array>();
  std::vector<nft::Object> objs;
  if (!nft::Decode(buf.Data(), buf.ByteLength(), &objs)) throw Napi::RangeError::New(env, "nftRecords: malformed netlink messages");
  std::string s = nft::VerifyRecords(objs);
  return Napi::String::New(env, s.data(), s.size());
}

Napi::Value NftDumpRequest(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto msg = static_cast<uint16_t>(info[0].As<Napi::Number>().Uint32Value());
  auto family = static_cast<uint8_t>(info[1].As<Napi::Number>().Uint32Value());
  std::string table = info.Length() > 2 && info[2].IsString() ? StringArg(env, info[2], "table") : "";
  std::string set = info.Length() > 3 && info[3].IsString() ? StringArg(env, info[3], "set") : "";
  auto req = nft::DumpRequest(msg, family, table, set);
  return Bin(env, req);
}


}  // namespace

void RegisterNft(Napi::Env env, Napi::Object exports) {
  exports.Set("nftEncode", Napi::Function::New<NftEncode>(env, "nftEncode"));
  exports.Set("nftDecode", Napi::Function::New<NftDecode>(env, "nftDecode"));
  exports.Set("nftRecords", Napi::Function::New<NftRecords>(env, "nftRecords"));
  exports.Set("nftDumpRequest", Napi::Function::New<NftDumpRequest>(env, "nftDumpRequest"));
}

}  // namespace podwire
