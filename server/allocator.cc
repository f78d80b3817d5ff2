#include "server/allocator.h"

#include <cstddef>

// jemalloc's control interface; weak, so that a binary linked without
// jemalloc (the sanitizer builds, libferry_server in another program) sees
// a null pointer here instead of failing to link.
extern "C" int mallctl(const char* name, void* old_value, size_t* old_length,
                       void* new_value, size_t new_length)
    __attribute__((weak));

namespace ferry {

void ReleaseFreedMemory() {
  if (mallctl == nullptr) return;
  // 4096 is MALLCTL_ARENAS_ALL: every arena.
  mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
}

}  // namespace ferry
