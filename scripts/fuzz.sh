#!/usr/bin/env bash
# Builds the libFuzzer targets in native/fuzz/ with clang (AddressSanitizer +
# UBSan) and runs each for a bounded time: scripts/fuzz.sh [SECONDS=30].
# Needs clang (apt-get install clang). Crashes land in build-native/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
out=${PODWIRE_FUZZ_DIR:-build-native/fuzz}  # build-native/ is git-ignored
mkdir -p "$out/artifacts" "$out/corpus"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Inative)
clang++ "${flags[@]}" native/fuzz/nft_fuzz.cc native/nft/nft_encode.cc native/nft/nft_decode.cc -o "$out/nft_fuzz"
# libFuzzer is chatty: keep its log, show the verdict (and the log's tail on failure).
if "$out/nft_fuzz" -max_total_time="$secs" -max_len=4096 -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
    "$out/corpus" >"$out/fuzz.log" 2>&1; then
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$out/fuzz.log" || true
  echo "fuzz: clean for ${secs}s (log: $out/fuzz.log)"
else
  tail -n 60 "$out/fuzz.log"
  echo "fuzz: FAILED (crash inputs in $out/artifacts/)" >&2
  exit 1
fi
