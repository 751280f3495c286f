// A small netlink message writer for nfnetlink: header, nfgenmsg, attributes
// (host order or big-endian integers, strings, nests). Appends to one
// buffer so a whole batch is built in place.
#pragma once
#include <endian.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace podwire::nft {

class NlWriter {
 public:
  explicit NlWriter(std::vector<uint8_t>* buf) : buf_(buf) {}

  // Starts a message; closes the previous one.
  void Begin(uint16_t type, uint16_t flags, uint8_t family, uint16_t resId) {
    End();
    msgStart_ = buf_->size();
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    Put(&h, sizeof h);
    nfgenmsg g{};
    g.nfgen_family = family;
    g.version = NFNETLINK_V0;
    g.res_id = htobe16(resId);
    Put(&g, sizeof g);
    open_ = true;
  }

  // Finishes the current message (writes its length).
  void End() {
    if (!open_) return;
    uint32_t len = static_cast<uint32_t>(buf_->size() - msgStart_);
    std::memcpy(buf_->data() + msgStart_, &len, 4);
    open_ = false;
  }

  void Attr(uint16_t type, const void* data, size_t len) {
    nlattr a{};
    a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
    a.nla_type = type;
    Put(&a, sizeof a);
    Put(data, len);
    Pad();
  }
  void Str(uint16_t type, const std::string& s) { Attr(type, s.c_str(), s.size() + 1); }
  void U8(uint16_t type, uint8_t v) { Attr(type, &v, 1); }
  void Be32(uint16_t type, uint32_t v) {
    uint32_t b = htobe32(v);
    Attr(type, &b, 4);
  }
  void Be64(uint16_t type, uint64_t v) {
    uint64_t b = htobe64(v);
    Attr(type, &b, 8);
  }

  size_t Nest(uint16_t type) {
    size_t at = buf_->size();
    nlattr a{};
    a.nla_type = type | NLA_F_NESTED;
    Put(&a, sizeof a);
    return at;
  }
  void EndNest(size_t at) {
    uint16_t len = static_cast<uint16_t>(buf_->size() - at);
    std::memcpy(buf_->data() + at, &len, 2);
  }

  size_t size() const { return buf_->size(); }

 private:
  void Put(const void* p, size_t n) {
    if (n == 0) return;
    size_t at = buf_->size();
    buf_->resize(at + n);
    std::memcpy(buf_->data() + at, p, n);
  }
  void Pad() { buf_->resize(NLA_ALIGN(buf_->size()), 0); }

  std::vector<uint8_t>* buf_;
  size_t msgStart_ = 0;
  bool open_ = false;
};

}  // namespace podwire::nft
