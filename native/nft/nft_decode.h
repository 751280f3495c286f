// nfnetlink bytes → Objects: the nf_tables messages of a batch we built, or
// the replies of a GETTABLE/GETCHAIN/GETRULE/GETSET/GETSETELEM dump. Bounds
// checked everywhere (it parses what the kernel, or a fuzzer, hands it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nft_ir.h"

namespace podwire::nft {

// Decodes every nf_tables message in `data` (batch begin/end, errors and
// other subsystems are skipped). Returns false when the framing is broken;
// objects decoded before that point are kept.
bool Decode(const uint8_t* data, size_t size, std::vector<Object>* out);

// Canonical text of one expression (NFTA_LIST_ELEM payload).
std::string ExprText(const uint8_t* data, size_t size);

// What verify compares of each object, as one string: per object, in order,
// kRecordFields fields each followed by a NUL (names, expressions and
// comments never hold one): kind, family, table, name, handle (decimal),
// shape (a chain's "regular" or "type T hook H priority P[ device D] policy
// N", a set's "key type T len L", a rule's expressions joined by "; ") and
// comment ("" when absent, else "#" + the comment). One JS string instead of
// an object per message: verify dumps every pod's ruleset at a restart.
inline constexpr size_t kRecordFields = 7;
std::string VerifyRecords(const std::vector<Object>& objs);

}  // namespace podwire::nft
