// libFuzzer target: inspect_coli_kv and import_coli_kv on arbitrary bytes.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  colikv_fuzz::coli_kv_one(data, size);
  return 0;
}
