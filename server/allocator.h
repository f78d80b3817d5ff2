// What ferryd asks of the memory allocator beyond malloc and free.
#ifndef FERRY_SERVER_ALLOCATOR_H_
#define FERRY_SERVER_ALLOCATOR_H_

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

}  // namespace ferry

#endif  // FERRY_SERVER_ALLOCATOR_H_
