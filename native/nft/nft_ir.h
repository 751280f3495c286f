// The nf_tables batch as data: the commands podwire sends (tables, chains,
// rules, sets, elements) and the expressions inside rules. The TS compiler
// lowers nft statements to this; the encoder turns it into one nfnetlink
// batch; the decoder turns kernel messages (a batch or a dump) back into
// `Object`s so the two can be compared. No N-API here (ctest and fuzzing).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace podwire::nft {

using Bytes = std::vector<uint8_t>;

// One expression. Only the fields its `type` uses are read; names of keys,
// operators and verdicts are nft's own (`mark`, `neq`, `jump`).
struct Expr {
  std::string type;        // meta ct payload cmp bitwise range immediate lookup counter nat redir tproxy
  std::string key;         // meta/ct key; cmp/range op; immediate verdict; nat type (snat/dnat)
  uint32_t dreg = 0;       // destination register (load); 0 = none
  uint32_t sreg = 0;       // source register (cmp, set, lookup, bitwise)
  std::string base;        // payload: ll nh th
  uint32_t offset = 0, len = 0;
  Bytes data, mask, xorv;  // cmp/immediate/range-from data; bitwise mask/xor
  Bytes data2;             // range-to
  std::string chain;       // immediate jump/goto target
  std::string set;         // lookup set name
  uint32_t setId = 0;      // lookup: id of a set created in the same batch
  uint32_t flags = 0;      // lookup (invert), nat/redir range flags
  uint32_t family = 0;     // nat/tproxy NFPROTO_*
  uint32_t regAddr = 0, regPort = 0;  // nat/tproxy: registers with address / port (min); 0 = none
};

struct Elem {
  Bytes key;
  std::optional<std::string> comment;
  uint64_t timeoutMs = 0;
};

enum class Op : uint8_t {
  kNewTable, kDelTable, kFlushTable,   // flush = delete every rule of the table
  kNewChain, kDelChain, kFlushChain,
  kNewRule,
  kNewSet, kDelSet, kFlushSet,
  kNewElem, kDelElem,
};

struct Command {
  Op op = Op::kNewTable;
  uint8_t family = 0;       // NFPROTO_*
  bool excl = false;        // create (fail if it exists) instead of add
  std::string table, name;  // name: chain or set
  std::optional<std::string> comment;
  uint32_t tableFlags = 0;
  // base chain
  bool base = false;
  std::string chainType;    // filter nat route
  uint32_t hook = 0;
  int32_t priority = 0;
  std::optional<uint32_t> policy;  // NF_ACCEPT / NF_DROP
  std::string device;
  // rule
  std::vector<Expr> exprs;
  bool append = true;       // add (append) vs insert (prepend)
  uint64_t position = 0;    // handle of the rule to add after / insert before; 0 = none
  uint32_t ruleId = 0;      // this rule's id in the batch; 0 = none
  uint32_t positionId = 0;  // id of a rule of this batch to place relative to
  // set
  uint32_t setFlags = 0, keyType = 0, keyLen = 0, setId = 0, size = 0;
  uint64_t timeoutMs = 0;
  std::vector<Elem> elems;
};

// A decoded table/chain/rule/set/element message. Expressions are rendered
// as canonical text (one line each; register numbers and fields the kernel
// derives are normalised) so a batch and a dump compare line by line.
struct Object {
  std::string kind;         // table chain rule set elem deltable delchain delrule delset delelem batch
  uint16_t msgType = 0;
  uint16_t nlFlags = 0;
  uint8_t family = 0;
  std::string table, name;  // name: chain/set; for rules: the chain
  uint64_t handle = 0;
  std::optional<std::string> comment;
  uint32_t flags = 0;       // table/set flags
  bool base = false;
  std::string chainType;
  uint32_t hook = 0;
  int32_t priority = 0;
  std::optional<uint32_t> policy;
  std::string device;
  std::vector<std::string> exprs;
  uint64_t position = 0;
  uint32_t ruleId = 0, positionId = 0;
  uint32_t keyType = 0, keyLen = 0, setId = 0, size = 0;
  std::vector<Elem> elems;
};

}  // namespace podwire::nft
