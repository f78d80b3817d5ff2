// libFuzzer's entry for one target, chosen at compile time by
// FERRY_FUZZ_ENTRY (tests/fuzz/CMakeLists.txt; built only with FERRY_FUZZ).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.h"

#ifndef FERRY_FUZZ_ENTRY
#error "FERRY_FUZZ_ENTRY names the entry (FuzzSchema, FuzzPipeline, ...)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ferry::fuzz::FERRY_FUZZ_ENTRY(data, size);
}
