// What podwire-cni answers on its own (docs/cni-protocol.md "Deciding without the agent"):
// VERSION, the ADDs it passes before contacting the agent, the ADDs the decision file lets
// pass while the agent is unreachable, and the per-command answer once it gave up on the
// agent. Pure: no syscall.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "cni-shim/config.h"
#include "cni-shim/decision_file.h"

namespace podwire::cni {

// {"cniVersion":…,"code":…,"msg":…,"details":…}
std::string CniErrorJson(std::string_view cni_version, int code, std::string_view msg, std::string_view details);
// {"cniVersion":"<kCurrentVersion>","supportedVersions":[<kSupportedVersions>]}
std::string VersionReply();

// Why an ADD passes before the agent is contacted, or null: a non-Kubernetes invocation (no
// K8S_POD_NAME/K8S_POD_NAMESPACE), a namespace in the config's exclude_namespaces, or the
// agent's own pod (name prefix kAgentPodNamePrefix in the config's pod_namespace).
const char* PassBeforeAgent(const Config& cfg, const CniArgs& args);

// True when the runtime passed the pod's annotations and they mark it as sidecar-injected.
bool SidecarAnnotated(const Config& cfg);

struct PassResult {
  bool ok = false;
  std::string stdout_text;  // ok: the result upstream would print
  int code = 0;             // !ok: the CNI error code
  std::string msg, details;
};
// The result of an ADD passed through: prevResult in the config's version, byte for byte as
// upstream prints it. No cniVersion is code 7, an unsupported one code 1, a prevResult upstream
// could not decode code 6.
PassResult PassThrough(const Config& cfg);

enum class Fallback {
  kFailTryLater,      // CNI error 11, exit 1
  kQueueDel,          // DEL: write a queue record, exit 0, no output
  kStatusOk,          // STATUS with status_always_ok: exit 0, no output
  kFailNotAvailable,  // STATUS: CNI error 50, exit 1
};

struct FallbackDecision {
  Fallback action = Fallback::kFailTryLater;
  std::string stdout_text;  // what to print (may be empty)
  int exit_code = 1;
  std::string note;  // one line for stderr, for the runtime's log
};

// The answer once the agent stayed unreachable until agent_wait_ms (or timed out). An ADD
// gets here only when nothing let it pass. `why` says what happened (the error's details).
FallbackDecision DecideUnreachable(Command cmd, const Config& cfg, std::string_view socket_path, std::string_view why);

}  // namespace podwire::cni
