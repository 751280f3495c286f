// ErrorInfo: a failure described without touching N-API, so it can be filled
// on any thread and turned into a JS NetError later on the JS thread.
#pragma once
#include <string>

namespace podwire {

struct ErrorInfo {
  int err = 0;              // positive errno (or ipset's private code >= 4096)
  std::string op;           // 'RTM_NEWROUTE', 'setns', 'spawn', ...
  std::string message;      // human text; extack text when the kernel gave one
  std::string code;         // optional override of the errno name
  std::string extack;       // kernel extended-ack message, if any
  int extackOffset = -1;    // kernel extended-ack offset, if any
  int index = -1;           // index of the failing message inside a request
  std::string echo;         // the kernel's copy of the failing message, when it sent one

  bool failed() const { return err != 0; }
  static ErrorInfo Errno(int e, std::string op, std::string message = {}) {
    ErrorInfo info;
    info.err = e;
    info.op = std::move(op);
    info.message = std::move(message);
    return info;
  }
};

}  // namespace podwire
