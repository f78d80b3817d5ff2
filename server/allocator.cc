#include "server/allocator.h"

#include <sys/types.h>

#include <cstddef>
#include <string>

// jemalloc's control interface; weak, so that a binary linked without
// jemalloc (the sanitizer builds, libferry_server in another program) sees
// a null pointer here instead of failing to link.
extern "C" int mallctl(const char* name, void* old_value, size_t* old_length,
                       void* new_value, size_t new_length)
    __attribute__((weak));

namespace ferry {

// In the names below, arena 4096 is MALLCTL_ARENAS_ALL: every arena.

void ReleaseFreedMemory() {
  if (mallctl == nullptr) return;
  mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
}

bool KeepFreedMemory() {
  if (mallctl == nullptr) return false;
  ssize_t never = -1;
  // The default for arenas made from now on, jemalloc's oversize arena
  // among them (which otherwise decays at once), then each arena there is.
  if (mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &never,
              sizeof(never)) != 0)
    return false;
  unsigned arenas = 0;
  size_t length = sizeof(arenas);
  if (mallctl("arenas.narenas", &arenas, &length, nullptr, 0) != 0)
    return false;
  for (unsigned i = 0; i < arenas; ++i) {
    // An arena not made yet answers with an error; it will take the default.
    const std::string name = "arena." + std::to_string(i) + ".dirty_decay_ms";
    mallctl(name.c_str(), nullptr, nullptr, &never, sizeof(never));
  }
  return true;
}

int64_t FreedMemoryHeld() {
  if (mallctl == nullptr) return 0;
  uint64_t epoch = 1;
  size_t length = sizeof(epoch);
  if (mallctl("epoch", &epoch, &length, &epoch, length) != 0) return 0;
  size_t pages = 0;
  length = sizeof(pages);
  if (mallctl("stats.arenas.4096.pdirty", &pages, &length, nullptr, 0) != 0)
    return 0;
  size_t page = 0;
  length = sizeof(page);
  if (mallctl("arenas.page", &page, &length, nullptr, 0) != 0) return 0;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page);
}

AllocatorOptions CurrentAllocatorOptions() {
  AllocatorOptions options;
  if (mallctl == nullptr) return options;
  const char* mode = nullptr;
  size_t length = sizeof(mode);
  if (mallctl("opt.thp", &mode, &length, nullptr, 0) == 0 && mode != nullptr)
    options.huge_pages = mode;
  size_t fit = 0;
  length = sizeof(fit);
  if (mallctl("opt.lg_extent_max_active_fit", &fit, &length, nullptr, 0) == 0)
    options.lg_extent_max_active_fit = static_cast<int64_t>(fit);
  return options;
}

}  // namespace ferry
