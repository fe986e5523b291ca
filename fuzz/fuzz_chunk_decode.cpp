// libFuzzer target: detail::decode_chunk on arbitrary payloads and headers.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  colikv_fuzz::chunk_decode_one(data, size);
  return 0;
}
