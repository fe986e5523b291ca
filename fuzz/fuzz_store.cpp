// libFuzzer target: opening, reading and rewriting mutated store files.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  colikv_fuzz::store_one(data, size);
  return 0;
}
