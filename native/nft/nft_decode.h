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

}  // namespace podwire::nft
