// jemalloc's options for Ferry's executables, compiled into each one that
// links jemalloc (CMakeLists.txt, ferry_executable_allocator). jemalloc
// reads this string at start-up, before MALLOC_CONF in the environment,
// which still overrides each option it names. Measured in
// docs/performance.md, "Sixteenth round".
//
// thp:always
//   jemalloc asks the kernel for transparent huge pages (2 MiB) for all of
//   its memory (madvise; Linux's usual mode, "madvise", gives them only
//   where asked). A large lowering writes hundreds of MiB of fresh memory;
//   one page fault per 2 MiB instead of per 4 KiB is what speeds up a
//   process that lowers once, and ferryd after it has given its pages back.
//   The price is resident memory: a huge page counts whole once touched.
//   Turn it off with MALLOC_CONF=thp:default.
// lg_extent_max_active_fit:12
//   A freed extent may be split for a request up to 4096 times smaller
//   (jemalloc's default: 64). With the default, once a job's freed memory
//   had merged into extents of hundreds of MiB, the next job's 1 MiB
//   blocks (the request's arena) and slabs could not use them and took
//   fresh pages instead: resident memory grew by hundreds of MiB with every
//   1M-node job, each page faulted in anew.
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "thp:always,lg_extent_max_active_fit:12";
}
