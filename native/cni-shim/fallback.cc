// Answers podwire-cni gives on its own; see fallback.h.
#include "cni-shim/fallback.h"

#include "cni-shim/cni_result.h"
#include "cni-shim/json.h"

namespace podwire::cni {

std::string CniErrorJson(std::string_view cni_version, int code, std::string_view msg, std::string_view details) {
  std::string j = "{\"cniVersion\":";
  AppendJsonString(&j, cni_version);
  j += ",\"code\":";
  j += std::to_string(code);
  j += ",\"msg\":";
  AppendJsonString(&j, msg);
  j += ",\"details\":";
  AppendJsonString(&j, details);
  j += '}';
  return j;
}

std::string VersionReply() {
  std::string j = "{\"cniVersion\":";
  AppendJsonString(&j, kCurrentVersion);
  j += ",\"supportedVersions\":[";
  bool first = true;
  for (std::string_view v : kSupportedVersions) {
    if (!first) j += ',';
    first = false;
    AppendJsonString(&j, v);
  }
  j += "]}";
  return j;
}

const char* PassBeforeAgent(const Config& cfg, const CniArgs& args) {
  bool k8s = args.pod_name && !args.pod_name->empty() && args.pod_namespace && !args.pod_namespace->empty();
  if (!k8s) return "not a Kubernetes pod (no K8S_POD_NAME/K8S_POD_NAMESPACE in CNI_ARGS)";
  for (const auto& ns : cfg.exclude_namespaces)
    if (ns == *args.pod_namespace) return "its namespace is in exclude_namespaces";
  if (args.pod_name->rfind(kAgentPodNamePrefix, 0) == 0 && *args.pod_namespace == cfg.pod_namespace) {
    return "it is the node agent's own pod";
  }
  return nullptr;
}

bool SidecarAnnotated(const Config& cfg) {
  if (!cfg.pod_annotation_keys) return false;
  for (const auto& k : *cfg.pod_annotation_keys)
    if (k == kSidecarStatusAnnotation) return true;
  return false;
}

PassResult PassThrough(const Config& cfg) {
  PassResult r;
  if (!cfg.cni_version || cfg.cni_version->empty()) {
    r.code = kErrInvalidConfig;
    r.msg = "cniVersion is missing from the network configuration";
    return r;
  }
  if (!IsSupportedVersion(*cfg.cni_version)) {
    r.code = kErrIncompatibleVersion;
    r.msg = "incompatible CNI version " + Printable(*cfg.cni_version);
    r.details = "supported:";
    for (std::string_view v : kSupportedVersions) r.details += " " + std::string(v);
    return r;
  }
  std::string err;
  if (!PassThroughResult(cfg.prev_result, *cfg.cni_version, &r.stdout_text, &err)) {
    r.stdout_text.clear();
    r.code = kErrDecode;
    r.msg = err;
    return r;
  }
  r.ok = true;
  return r;
}

FallbackDecision DecideUnreachable(Command cmd, const Config& cfg, std::string_view socket_path, std::string_view why) {
  const std::string msg = "podwire: node agent not reachable at " + std::string(socket_path);
  const std::string details = std::string(why) +
                              "; check that the podwire agent (istio-cni-node) is running on this node and serves "
                              "that socket";
  FallbackDecision d;
  auto fail = [&](Fallback a, int code) {
    d.action = a;
    d.exit_code = 1;
    d.stdout_text = CniErrorJson(ConfigCniVersion(&cfg), code, msg, details);
    d.note = msg + ": " + std::string(why);
  };
  switch (cmd) {
    case Command::kDel:
      d.action = Fallback::kQueueDel;
      d.exit_code = 0;
      d.note = msg + " (" + std::string(why) + "); DEL queued for the agent";
      return d;
    case Command::kStatus:
      if (cfg.status_always_ok) {
        d.action = Fallback::kStatusOk;
        d.exit_code = 0;
        d.note = msg + " (" + std::string(why) + "); STATUS ok (status_always_ok)";
        return d;
      }
      fail(Fallback::kFailNotAvailable, kErrPluginNotAvailable);
      return d;
    default:  // ADD (nothing let it pass), CHECK, GC (VERSION and unknown commands never get here)
      fail(Fallback::kFailTryLater, kErrTryAgainLater);
      return d;
  }
}

}  // namespace podwire::cni
