// The ADD result podwire-cni prints when it passes a pod through without the agent: the
// config's prevResult decoded and printed byte for byte as upstream's istio-cni plugin does
// (containernetworking/cni v1.3.0). The same rules as lib/cni/result.ts (which has the
// details); test/fixtures/cni-results/goldens.json holds upstream's real output. Pure.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace podwire::cni {

// `prev_result`: the prevResult's JSON text (nullopt: none). `version`: the config's
// cniVersion, one of kSupportedVersions. Returns false (*err: why; CNI code 6) where upstream
// fails to decode the prevResult.
bool PassThroughResult(const std::optional<std::string>& prev_result, std::string_view version, std::string* out,
                       std::string* err);

}  // namespace podwire::cni
