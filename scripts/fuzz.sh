#!/usr/bin/env bash
# Builds the libFuzzer targets in native/fuzz/ with clang (AddressSanitizer +
# UBSan) and runs each for a bounded time, side by side:
#   scripts/fuzz.sh [SECONDS=15] [TARGET...]
#   (TARGET: nft_fuzz, nlmsg_fuzz, cni_response_fuzz, cni_config_fuzz, cni_decision_fuzz)
# Needs clang and its compiler-rt (Debian: clang libclang-rt-14-dev; npm run bootstrap).
# Prints one line per target, `fuzz-result <target> ok|failed|skipped <detail>`, which
# scripts/test.mjs counts; exits 0 when all ran clean, 2 when the toolchain is missing.
# Work dir: $PODWIRE_FUZZ_DIR (default build-native/fuzz, git-ignored); crash inputs land
# in <dir>/artifacts/, the corpus grows in <dir>/corpus/<target>/ (seeds: native/fuzz/corpus/).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
shift || true
out=${PODWIRE_FUZZ_DIR:-build-native/fuzz}
mkdir -p "$out/artifacts"

# target -> its sources besides native/fuzz/<target>.cc
declare -A sources=(
  [nft_fuzz]="native/nft/nft_encode.cc native/nft/nft_decode.cc"
  [nlmsg_fuzz]=""
  [cni_response_fuzz]="native/cni-shim/http_response.cc native/cni-shim/config.cc native/cni-shim/json.cc"
  [cni_config_fuzz]="native/cni-shim/config.cc native/cni-shim/json.cc native/cni-shim/cni_result.cc"
  [cni_decision_fuzz]="native/cni-shim/decision_file.cc native/cni-shim/json.cc"
)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(nft_fuzz nlmsg_fuzz cni_response_fuzz cni_config_fuzz cni_decision_fuzz)
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Inative)

skip_all() {
  for t in "${targets[@]}"; do echo "fuzz-result $t skipped ($1)"; done
  exit 2
}
command -v clang++ >/dev/null || skip_all "clang++ not found: apt-get install clang"
# libFuzzer's runtime and <fuzzer/FuzzedDataProvider.h> come with compiler-rt, not clang itself.
probe=$out/probe.cc
printf '%s\n' '#include <fuzzer/FuzzedDataProvider.h>' \
  'extern "C" int LLVMFuzzerTestOneInput(const unsigned char* d, unsigned long n) { FuzzedDataProvider p(d, n); return 0; }' >"$probe"
if ! clang++ "${flags[@]}" "$probe" -o "$out/probe" >"$out/probe.log" 2>&1; then
  v=$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
  skip_all "clang++ cannot build a libFuzzer target (install libclang-rt-${v:-N}-dev; see $out/probe.log)"
fi

# Build all, then run all, in parallel.
declare -A pids
for t in "${targets[@]}"; do
  [ -f "native/fuzz/$t.cc" ] || { echo "fuzz-result $t failed (no native/fuzz/$t.cc)"; continue; }
  # shellcheck disable=SC2086
  clang++ "${flags[@]}" "native/fuzz/$t.cc" ${sources[$t]:-} -o "$out/$t" >"$out/$t.build.log" 2>&1 &
  pids[$t]=$!
done
built=()
for t in "${!pids[@]}"; do
  if wait "${pids[$t]}"; then built+=("$t"); else
    cat "$out/$t.build.log" >&2
    echo "fuzz-result $t failed (build error, log: $out/$t.build.log)"
  fi
done
pids=()
for t in "${built[@]}"; do
  mkdir -p "$out/corpus/$t"
  seeds=native/fuzz/corpus/${t%_fuzz}
  # libFuzzer adds new inputs to the first corpus dir only; the seeds stay read-only.
  "$out/$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
    -artifact_prefix="$out/artifacts/$t-" -print_final_stats=1 \
    "$out/corpus/$t" $([ -d "$seeds" ] && echo "$seeds") >"$out/$t.log" 2>&1 &
  pids[$t]=$!
done
status=0
for t in "${built[@]}"; do
  if wait "${pids[$t]}"; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")
    echo "fuzz-result $t ok (${execs:-?} execs in ${secs}s, log: $out/$t.log)"
  else
    tail -n 60 "$out/$t.log" >&2
    echo "fuzz-result $t failed (crash input in $out/artifacts/$t-*, log: $out/$t.log)"
    status=1
  fi
done
[ ${#built[@]} -eq ${#targets[@]} ] || status=1
exit $status
