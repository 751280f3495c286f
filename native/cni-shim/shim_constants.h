// The names and limits podwire-cni shares with the TypeScript side (lib/cni/constants.ts).
// test/cni/constants.test.ts parses this header: every constant here names its TypeScript
// twin in a trailing `// ts: NAME` comment and the two must hold the same value, so a change
// lands in both files or the test fails. Keep one constant per line in this form.
#pragma once
#include <cstddef>
#include <string_view>

namespace podwire::cni {

inline constexpr std::string_view kDefaultRunDir = "/var/run/istio-cni";  // ts: DEFAULT_RUN_DIR
inline constexpr std::string_view kSocketName = "pluginevent.sock";  // ts: PLUGIN_EVENT_SOCKET
inline constexpr std::string_view kDelQueueDirName = "cni-del-queue";  // ts: DEL_QUEUE_DIR
inline constexpr size_t kDelQueueMax = 4096;  // ts: DEL_QUEUE_MAX
inline constexpr std::string_view kDecisionFileName = "cni-decisions.json";  // ts: DECISION_FILE
inline constexpr int kDecisionFileVersion = 1;  // ts: DECISION_FILE_VERSION
inline constexpr std::string_view kAgentPodNamePrefix = "istio-cni-node-";  // ts: AGENT_POD_NAME_PREFIX
inline constexpr std::string_view kSupportedVersions[] = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};  // ts: SUPPORTED_VERSIONS
inline constexpr std::string_view kCurrentVersion = "1.1.0";  // ts: CURRENT_VERSION

}  // namespace podwire::cni
