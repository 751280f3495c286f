// N-API surface of the nf_tables encoder/decoder (native/nft).
#pragma once
#include <napi.h>

namespace podwire {

void RegisterNft(Napi::Env env, Napi::Object exports);

}  // namespace podwire
