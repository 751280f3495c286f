// IR → nfnetlink bytes. Pure: no sockets, no N-API.
#pragma once
#include <string>
#include <vector>

#include "nft_ir.h"

namespace podwire::nft {

// One atomic batch: BATCH_BEGIN, one message per command, BATCH_END.
// Errors always come back naming their message (by sequence number). With
// `ackEach` every command also asks for an ACK; without it only the last
// command does: nfnetlink delivers its replies in message order after
// processing the whole batch, so that one ACK (or its error) arrives after
// every earlier error and closes the request with one ACK instead of one per
// command. `msgCommand[i]` is the command index of message i (-1 for
// begin/end). Returns false and fills `error` when a command is invalid
// (unknown expression, key, oversize data).
bool EncodeBatch(const std::vector<Command>& cmds, std::vector<uint8_t>* out, std::vector<int>* msgCommand,
                 std::string* error, bool ackEach = true);

// Dump request for NFT_MSG_GETTABLE / GETCHAIN / GETRULE / GETSET (family
// NFPROTO_UNSPEC = all; `table` non-empty restricts rules and sets to it), or
// GETSETELEM of one set (table and set required).
std::vector<uint8_t> DumpRequest(uint16_t msg, uint8_t family, const std::string& table, const std::string& set);

}  // namespace podwire::nft
