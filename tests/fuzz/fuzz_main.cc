// libFuzzer's entry for one target, chosen at compile time by
// FERRY_FUZZ_ENTRY (tests/fuzz/CMakeLists.txt; built only with FERRY_FUZZ).
// The request targets (FERRY_FUZZ_REQUEST_MUTATOR) also get the
// structure-aware mutator (proto_mutator.h), half of the time; the other
// half, and whenever the input is no request, libFuzzer mutates bytes.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/proto_mutator.h"

#ifndef FERRY_FUZZ_ENTRY
#error "FERRY_FUZZ_ENTRY names the entry (FuzzSchema, FuzzPipeline, ...)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ferry::fuzz::FERRY_FUZZ_ENTRY(data, size);
}

#ifdef FERRY_FUZZ_REQUEST_MUTATOR
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned int seed) {
  if (seed % 2 == 0) {
    if (size_t mutated =
            ferry::fuzz::MutateRequestBytes(data, size, max_size, seed / 2))
      return mutated;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
#endif
