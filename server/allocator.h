// What ferryd asks of the memory allocator beyond malloc and free.
#ifndef FERRY_SERVER_ALLOCATOR_H_
#define FERRY_SERVER_ALLOCATOR_H_

#include <cstdint>
#include <string>

namespace ferry {

// Returns the pages of memory already freed to the operating system.
// jemalloc (which the executables link) keeps freed pages resident, for
// reuse by the arena of the thread that freed them, until a decay timer
// runs out seconds later; a large job frees its parsed request on one
// thread's arena and goes on allocating its response on another's, so
// without this the freed pages still count in the process's peak. A no-op
// under any other allocator. Costs a system call per dirty extent: for
// large jobs only.
void ReleaseFreedMemory();

// From now on, jemalloc keeps every freed page for reuse until
// ReleaseFreedMemory gives them back: its decay timers are turned off, for
// the arenas there are and those made later. (By default jemalloc gives
// back allocations of 8 MiB and more, such as a large program's node array,
// as soon as they are freed, so the next job faults every page in afresh;
// on hosts where a fresh page costs microseconds that is most of a large
// lowering: docs/performance.md, "Eleventh round".) The caller bounds what
// is kept, with FreedMemoryHeld. False, and nothing changed, under any
// other allocator.
bool KeepFreedMemory();

// Bytes of freed pages the allocator holds resident for reuse (jemalloc's
// dirty pages, every arena); 0 under any other allocator. Refreshes
// jemalloc's statistics: tens of microseconds.
int64_t FreedMemoryHeld();

// The options jemalloc runs with, as set for the executables by
// server/malloc_conf.cc (or MALLOC_CONF in the environment).
struct AllocatorOptions {
  // Its transparent-huge-page mode: "always" where it asks for 2 MiB pages,
  // "not supported" where the kernel offers none; empty under any other
  // allocator.
  std::string huge_pages;
  // How much larger than a request a freed extent it splits may be (log2);
  // -1 under any other allocator.
  int64_t lg_extent_max_active_fit = -1;
};
AllocatorOptions CurrentAllocatorOptions();

}  // namespace ferry

#endif  // FERRY_SERVER_ALLOCATOR_H_
