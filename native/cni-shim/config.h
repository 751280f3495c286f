// What podwire-cni reads from its invocation (docs/cni-protocol.md): the plugin entry on
// stdin, CNI_ARGS, the CNI_* environment and the command. Pure: no syscall.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cni-shim/shim_constants.h"

namespace podwire::cni {

// CNI error codes (CNI spec "Error codes") the shim reports itself.
inline constexpr int kErrIncompatibleVersion = 1;
inline constexpr int kErrInvalidEnv = 4;
inline constexpr int kErrDecode = 6;
inline constexpr int kErrInvalidConfig = 7;
inline constexpr int kErrTryAgainLater = 11;
inline constexpr int kErrPluginNotAvailable = 50;

// Limits (docs/cni-protocol.md).
inline constexpr size_t kMaxStdin = size_t{1} << 20;
inline constexpr size_t kMaxEnvValue = size_t{64} << 10;
inline constexpr int64_t kMaxConfigMs = 3'600'000;  // agent_wait_ms / agent_timeout_ms upper bound
inline constexpr int64_t kDefaultAgentWaitMs = 10000;
inline constexpr int64_t kDefaultAgentTimeoutMs = 30000;
// Reading stdin: the runtime writes the config and closes the pipe at once; one that never
// closes it would hold the shim forever. The bound is the config-independent default agent
// wait (the config is what is being read, so its own agent_wait_ms is not known yet).
inline constexpr int64_t kStdinTimeoutMs = kDefaultAgentWaitMs;
// The CRI capability: containerd passes the pod's annotations under runtimeConfig.
inline constexpr std::string_view kPodAnnotationsCapability = "io.kubernetes.cri.pod-annotations";
// Upstream's sidecar injector stamps it on every pod it injected: such a pod needs the plugin.
inline constexpr std::string_view kSidecarStatusAnnotation = "sidecar.istio.io/status";

// ---------------------------------------------------------------- stdin config

struct Config {
  std::optional<std::string> cni_version;
  std::string run_dir = std::string(kDefaultRunDir);  // no trailing '/' (root is "")
  std::vector<std::string> exclude_namespaces;
  std::string pod_namespace;
  int64_t agent_wait_ms = kDefaultAgentWaitMs;
  int64_t agent_timeout_ms = kDefaultAgentTimeoutMs;
  bool status_always_ok = false;
  std::optional<std::string> prev_result;  // raw JSON text of the object, verbatim
  // runtimeConfig["io.kubernetes.cri.pod-annotations"], when the runtime passed an object there.
  std::optional<std::vector<std::string>> pod_annotation_keys;
};

struct ConfigError {
  int code = 0;  // kErrDecode (not JSON) or kErrInvalidConfig (JSON, wrong shape)
  std::string msg;
};

// Parses the plugin entry the runtime gives on stdin. Malformed JSON is
// kErrDecode; a non-object, a known field of the wrong type or out of range
// is kErrInvalidConfig. Duplicate keys: the last wins (JSON.parse, which is
// what the agent uses); null means "not set". runtimeConfig is read only for
// the pod annotations and never refused (the agent owns its validation).
bool ParseConfig(std::string_view text, Config* cfg, ConfigError* err);

std::string_view ConfigCniVersion(const Config* cfg);  // config's, else kCurrentVersion
std::string SocketPath(const Config& cfg);               // <run_dir>/pluginevent.sock
std::string DecisionFilePath(const Config& cfg);         // <run_dir>/cni-decisions.json
bool IsSupportedVersion(std::string_view v);

// ---------------------------------------------------------------- CNI_ARGS

struct CniArgs {
  std::optional<std::string> pod_name;
  std::optional<std::string> pod_namespace;
  std::optional<std::string> pod_uid;
  std::optional<std::string> infra_container_id;
};

// `K=V;K=V` as Go's types.LoadArgs reads it: "" is no args; every pair needs
// a '=' (an empty pair such as a trailing ';' is an error); the value is
// everything after the first '='; keys are case-sensitive, unknown ones
// (IgnoreUnknown included) are ignored; a repeated key: the last wins. On
// failure *out is left empty.
bool ParseCniArgs(std::string_view s, CniArgs* out, std::string* err);

// ---------------------------------------------------------------- environment

struct EnvVar {
  std::string name;
  std::string value;
};

// Every CNI_* entry of `envp` (environ), in order; a repeated name keeps its
// first value (what getenv returns). Returns false (CNI code 4; *err: the
// first problem) when a value is over kMaxEnvValue or an entry is not valid
// UTF-8 (it could not be sent verbatim in a JSON string); such entries are
// left out and the others are still collected, so CNI_COMMAND is known.
bool CollectCniEnv(const char* const* envp, std::vector<EnvVar>* out, std::string* err);
const EnvVar* FindEnv(const std::vector<EnvVar>& env, std::string_view name);

// ---------------------------------------------------------------- commands

enum class Command { kAdd, kDel, kCheck, kGc, kStatus, kVersion, kUnknown };
Command ParseCommand(std::string_view s);

}  // namespace podwire::cni
