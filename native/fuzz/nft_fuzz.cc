// libFuzzer target for the nf_tables codec (native/nft): the input drives
// both halves.
//  - The decoder gets the raw bytes (what a dump or a hostile peer could
//    hand it): it must never read out of bounds or crash.
//  - The bytes also describe a command list for the encoder (fields drawn
//    from FuzzedDataProvider); whatever it accepts must decode again into
//    exactly one object per command, with expressions intact.
// Build and run: scripts/fuzz.sh SECONDS (clang, -fsanitize=fuzzer,address,undefined).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "nft/nft_decode.h"
#include "nft/nft_encode.h"

using namespace podwire::nft;

namespace {

const char* const kTypes[] = {"meta", "ct", "payload", "cmp", "bitwise", "range", "immediate",
                              "lookup", "counter", "nat", "redir", "tproxy", "bogus"};
const char* const kKeys[] = {"mark", "l4proto", "nfproto", "iifname", "skuid", "state", "zone", "eq", "neq",
                             "lt", "accept", "drop", "jump", "goto", "return", "snat", "dnat", ""};
const char* const kBases[] = {"ll", "nh", "th", "xx"};

std::string Name(FuzzedDataProvider& p) { return p.ConsumeRandomLengthString(20); }

Bytes Data(FuzzedDataProvider& p) { return p.ConsumeBytes<uint8_t>(p.ConsumeIntegralInRange<size_t>(0, 70)); }

Expr MakeExpr(FuzzedDataProvider& p) {
  Expr e;
  e.type = p.PickValueInArray(kTypes);
  e.key = p.PickValueInArray(kKeys);
  e.dreg = p.ConsumeIntegralInRange<uint32_t>(0, 30);
  e.sreg = p.ConsumeIntegralInRange<uint32_t>(0, 30);
  e.base = p.PickValueInArray(kBases);
  e.offset = p.ConsumeIntegral<uint8_t>();
  e.len = p.ConsumeIntegralInRange<uint32_t>(0, 70);
  e.data = Data(p);
  e.data2 = Data(p);
  e.mask = Data(p);
  e.xorv = Data(p);
  if (p.ConsumeBool()) e.chain = Name(p);
  if (p.ConsumeBool()) e.set = Name(p);
  e.setId = p.ConsumeIntegral<uint32_t>();
  e.flags = p.ConsumeIntegral<uint32_t>();
  e.family = p.ConsumeIntegral<uint8_t>();
  e.regAddr = p.ConsumeIntegralInRange<uint32_t>(0, 30);
  e.regPort = p.ConsumeIntegralInRange<uint32_t>(0, 30);
  return e;
}

Command MakeCommand(FuzzedDataProvider& p) {
  Command c;
  c.op = static_cast<Op>(p.ConsumeIntegralInRange<int>(0, static_cast<int>(Op::kDelElem)));
  c.family = p.ConsumeIntegral<uint8_t>();
  c.excl = p.ConsumeBool();
  c.table = Name(p);
  c.name = Name(p);
  if (p.ConsumeBool()) c.comment = p.ConsumeRandomLengthString(140);
  c.base = p.ConsumeBool();
  c.chainType = Name(p);
  c.hook = p.ConsumeIntegral<uint8_t>();
  c.priority = p.ConsumeIntegral<int32_t>();
  if (p.ConsumeBool()) c.policy = p.ConsumeIntegral<uint32_t>();
  size_t n = p.ConsumeIntegralInRange<size_t>(0, 8);
  for (size_t i = 0; i < n; ++i) c.exprs.push_back(MakeExpr(p));
  c.append = p.ConsumeBool();
  c.position = p.ConsumeIntegral<uint64_t>();
  c.ruleId = p.ConsumeIntegral<uint32_t>();
  c.positionId = p.ConsumeIntegral<uint32_t>();
  c.setFlags = p.ConsumeIntegral<uint32_t>();
  c.keyType = p.ConsumeIntegral<uint32_t>();
  c.keyLen = p.ConsumeIntegralInRange<uint32_t>(0, 70);
  c.setId = p.ConsumeIntegral<uint32_t>();
  c.size = p.ConsumeIntegral<uint32_t>();
  size_t m = p.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < m; ++i) {
    Elem e;
    e.key = Data(p);
    if (p.ConsumeBool()) e.comment = p.ConsumeRandomLengthString(140);
    c.elems.push_back(std::move(e));
  }
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Object> objs;
  Decode(data, size, &objs);
  // Whatever decoded, its records have exactly kRecordFields NUL-ended fields each (nothing decoded holds a NUL).
  std::string rec = VerifyRecords(objs);
  size_t nuls = 0;
  for (char ch : rec) nuls += ch == '\0';
  if (nuls != objs.size() * kRecordFields || (!rec.empty() && rec.back() != '\0')) abort();

  FuzzedDataProvider p(data, size);
  std::vector<Command> cmds;
  size_t n = p.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < n; ++i) cmds.push_back(MakeCommand(p));
  std::vector<uint8_t> out;
  std::vector<int> idx;
  std::string err;
  if (!EncodeBatch(cmds, &out, &idx, &err, p.ConsumeBool())) return 0;
  std::vector<Object> back;
  if (!Decode(out.data(), out.size(), &back)) abort();             // our own framing must parse
  if (back.size() != cmds.size() || idx.size() != cmds.size() + 2) abort();
  for (size_t i = 0; i < cmds.size(); ++i) {
    if (back[i].table != cmds[i].table) abort();
    if (cmds[i].op == Op::kNewRule && back[i].exprs.size() != cmds[i].exprs.size()) abort();
  }
  return 0;
}
