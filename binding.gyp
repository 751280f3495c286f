{
  # Two targets. podwire.node: on Linux the real addon; elsewhere a stub whose
  # functions throw ENOSYS, so installing on a laptop never breaks. podwire-cni:
  # the static CNI plugin executable (Linux only).
  # C++ exceptions are on (node_addon_api_except); N-API version is pinned.
  "targets": [
    {
      "target_name": "podwire",
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "defines": ["NAPI_VERSION=8"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=c++17"],
      "conditions": [
        ["OS=='linux'", {
          "sources": [
            "native/addon.cc",
            "native/common/errors.cc",
            "native/common/jobs.cc",
            "native/common/heap.cc",
            "native/netns/netns_ops.cc",
            "native/netns/netns_binding.cc",
            "native/nl/nl_socket.cc",
            "native/sock/unix_ops.cc", "native/sock/inet_ops.cc", "native/sock/unix_socket.cc", "native/sock/sock_binding.cc",
            "native/nft/nft_encode.cc", "native/nft/nft_decode.cc", "native/nft/nft_binding.cc"
          ],
          "cflags_cc": ["-std=c++20", "-fvisibility=hidden", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-fstack-protector-strong"],
          "ldflags": ["-Wl,--exclude-libs,ALL", "-Wl,-z,relro,-z,now"]
        }, {
          "sources": ["native/stub.cc"],
          "cflags_cc": ["-std=c++20", "-fexceptions"],
          "xcode_settings": {"GCC_ENABLE_CPP_EXCEPTIONS": "YES", "CLANG_CXX_LANGUAGE_STANDARD": "c++20"},
          "msvs_settings": {"VCCLCompilerTool": {"ExceptionHandling": 1, "AdditionalOptions": ["/std:c++20"]}}
        }]
      ]
    },
    {
      # podwire-cni, the CNI plugin the runtime execs (docs/cni-protocol.md): a static
      # executable next to the addon, build/Release/podwire-cni. No N-API, no node: only
      # native/cni-shim/ and native/common/fd.h; -static links glibc and libstdc++ in.
      # Linux only (elsewhere the target builds nothing).
      "target_name": "podwire-cni",
      "conditions": [
        ["OS=='linux'", {
          "type": "executable",
          "sources": ["native/cni-shim/main.cc", "native/cni-shim/json.cc", "native/cni-shim/config.cc",
                      "native/cni-shim/http_response.cc", "native/cni-shim/cni_result.cc", "native/cni-shim/fallback.cc",
                      "native/cni-shim/decision_file.cc", "native/cni-shim/del_queue.cc", "native/cni-shim/shim_io.cc"],
          "include_dirs": ["native"],
          "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=c++17"],
          "cflags_cc": ["-std=c++20", "-fexceptions", "-Wall", "-Wextra", "-Wshadow", "-fstack-protector-strong",
                        "-ffunction-sections", "-fdata-sections"],
          "ldflags": ["-static", "-Wl,--gc-sections", "-Wl,-z,relro,-z,now"],
          "configurations": {"Release": {"cflags!": ["-O3"], "cflags": ["-O2"]}}
        }, {
          "type": "none"
        }]
      ]
    }
  ]
}
