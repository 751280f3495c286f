// Netlink framing shared by every netlink user in the addon (rtnetlink,
// ipset, nf_tables): walking a buffer of messages, renumbering sequence
// numbers, and decoding NLMSG_ERROR / NLMSG_DONE replies including the
// kernel's extended ack. Pure functions over bytes: no sockets, no N-API,
// so they are unit-tested under ctest and fuzzable.
#pragma once
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace podwire::nl {

// One message inside a buffer: offset and total (unaligned) length.
struct MsgSpan {
  size_t offset;
  size_t length;
};

// Splits a buffer into messages. Returns false when a header is malformed
// (length shorter than a header or running past the buffer).
inline bool Split(const uint8_t* data, size_t size, std::vector<MsgSpan>* out) {
  size_t off = 0;
  while (off < size) {
    if (size - off < sizeof(nlmsghdr)) return false;
    nlmsghdr h;
    std::memcpy(&h, data + off, sizeof h);
    if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > size - off) return false;
    out->push_back({off, h.nlmsg_len});
    size_t step = NLMSG_ALIGN(h.nlmsg_len);
    if (step > size - off) step = size - off;  // last message may be unpadded
    off += step;
  }
  return true;
}

inline nlmsghdr Header(const uint8_t* data, const MsgSpan& m) {
  nlmsghdr h;
  std::memcpy(&h, data + m.offset, sizeof h);
  return h;
}

// What a request message waits for: nothing, an ACK (or error), or the end
// of a dump (NLMSG_DONE or error).
enum class Expect { kNone, kAck, kDone };

inline Expect ExpectFor(const nlmsghdr& h) {
  if ((h.nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP && h.nlmsg_type >= NLMSG_MIN_TYPE)
    return Expect::kDone;
  if (h.nlmsg_flags & NLM_F_ACK) return Expect::kAck;
  return Expect::kNone;
}

// Decoded NLMSG_ERROR (error == 0 is an ACK) or NLMSG_DONE.
struct Status {
  int error = 0;  // negative errno as the kernel sends it, 0 for ACK/DONE
  std::string extackMsg;
  int extackOffset = -1;
  // The kernel's copy of the failing request when the error is not capped
  // (ipset sends its own errors uncapped and writes the failing element's
  // line number into that copy). Points into the decoded buffer.
  const uint8_t* echo = nullptr;
  size_t echoLen = 0;
};

// Decodes an NLMSG_ERROR message. Handles both capped (NETLINK_CAP_ACK) and
// full echoes of the original message, and the NLMSGERR_ATTR_* TLVs that
// follow when NLM_F_ACK_TLVS is set.
inline std::optional<Status> DecodeError(const uint8_t* msg, size_t len) {
  if (len < NLMSG_HDRLEN + sizeof(nlmsgerr)) return std::nullopt;
  nlmsghdr h;
  std::memcpy(&h, msg, sizeof h);
  nlmsgerr e;
  std::memcpy(&e, msg + NLMSG_HDRLEN, sizeof e);
  Status s;
  s.error = e.error;
  const size_t echoAt = NLMSG_HDRLEN + offsetof(nlmsgerr, msg);
  if (!(h.nlmsg_flags & NLM_F_CAPPED) && e.error < 0 && e.msg.nlmsg_len > sizeof(nlmsghdr) &&
      e.msg.nlmsg_len <= len - echoAt) {
    s.echo = msg + echoAt;
    s.echoLen = e.msg.nlmsg_len;
  }
  if (!(h.nlmsg_flags & NLM_F_ACK_TLVS)) return s;
  size_t off = NLMSG_HDRLEN + sizeof(nlmsgerr);
  // Without NLM_F_CAPPED the original payload is echoed after the header.
  // An echo that claims more than the message holds leaves no room for TLVs
  // (and aligning such a length in 32 bits would wrap: compute in size_t).
  if (!(h.nlmsg_flags & NLM_F_CAPPED)) {
    if (e.msg.nlmsg_len < sizeof(nlmsghdr) || e.msg.nlmsg_len > len - echoAt) return s;
    off += ((static_cast<size_t>(e.msg.nlmsg_len) + NLMSG_ALIGNTO - 1) & ~static_cast<size_t>(NLMSG_ALIGNTO - 1)) - sizeof(nlmsghdr);
  }
  while (off + sizeof(nlattr) <= len) {
    nlattr a;
    std::memcpy(&a, msg + off, sizeof a);
    if (a.nla_len < sizeof(nlattr) || a.nla_len > len - off) break;
    const uint8_t* payload = msg + off + NLA_HDRLEN;
    size_t plen = a.nla_len - NLA_HDRLEN;
    switch (a.nla_type & NLA_TYPE_MASK) {
      case NLMSGERR_ATTR_MSG: {
        size_t n = strnlen(reinterpret_cast<const char*>(payload), plen);
        s.extackMsg.assign(reinterpret_cast<const char*>(payload), n);
        break;
      }
      case NLMSGERR_ATTR_OFFS:
        if (plen >= 4) {
          uint32_t v;
          std::memcpy(&v, payload, 4);
          s.extackOffset = static_cast<int>(v);
        }
        break;
      default:
        break;
    }
    off += NLA_ALIGN(a.nla_len);
  }
  return s;
}

// NLMSG_DONE carries an int status (negative errno when the dump failed),
// and, like errors, possibly extended-ack TLVs that we do not need here.
inline Status DecodeDone(const uint8_t* msg, size_t len) {
  Status s;
  if (len >= NLMSG_HDRLEN + sizeof(int)) std::memcpy(&s.error, msg + NLMSG_HDRLEN, sizeof(int));
  return s;
}

// Rewrites sequence numbers of every message in place, starting at `first`.
// Returns the number of messages, or -1 if the buffer is malformed.
inline long Renumber(uint8_t* data, size_t size, uint32_t first) {
  std::vector<MsgSpan> spans;
  if (!Split(data, size, &spans)) return -1;
  uint32_t seq = first;
  for (const auto& m : spans) {
    std::memcpy(data + m.offset + offsetof(nlmsghdr, nlmsg_seq), &seq, sizeof seq);
    ++seq;
  }
  return static_cast<long>(spans.size());
}

}  // namespace podwire::nl
