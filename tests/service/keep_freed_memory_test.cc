// Freed memory kept for the next jobs (server/allocator.h, ferryd's
// --keep-freed-bytes), and the allocator options the executables carry
// (server/malloc_conf.cc). This binary links jemalloc, as ferryd does; built
// without it (the sanitizer builds), nothing is kept and the calls say so.
// KeepFreedMemory is process-wide: ctest runs each test in its own process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "client/testing/synthetic_program.h"
#include "server/allocator.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

#ifdef FERRY_LINKS_JEMALLOC
constexpr bool kJemalloc = true;
#else
constexpr bool kJemalloc = false;
#endif

// Allocates `bytes`, writes every page, frees them.
void TouchAndFree(int64_t bytes) {
  std::unique_ptr<char[]> block(new char[bytes]);
  for (int64_t i = 0; i < bytes; i += 4096) block[i] = static_cast<char>(i);
  // Read back, so that the writes are not optimised away.
  int64_t sum = 0;
  for (int64_t i = 0; i < bytes; i += 4096) sum += block[i];
  EXPECT_NE(sum, -1);
}

// First: the tests after it turn keeping on for the process (ctest runs each
// alone anyway).
TEST(KeepFreedMemory, WithoutKeepingALargeBlockIsGivenBackAtOnce) {
  ReleaseFreedMemory();
  TouchAndFree(64 * kMiB);
  EXPECT_LT(FreedMemoryHeld(), 64 * kMiB);
  if (!kJemalloc) {
    EXPECT_EQ(FreedMemoryHeld(), 0);
  }
}

TEST(KeepFreedMemory, AFreedBlockIsKeptUntilReleased) {
  if (!kJemalloc) {
    EXPECT_FALSE(KeepFreedMemory());
    EXPECT_EQ(FreedMemoryHeld(), 0);
    return;
  }
  ASSERT_TRUE(KeepFreedMemory());
  ReleaseFreedMemory();
  const int64_t before = FreedMemoryHeld();
  // 64 MiB: jemalloc's oversize arena, which by default gives a freed
  // block back at once.
  TouchAndFree(64 * kMiB);
  EXPECT_GE(FreedMemoryHeld(), before + 64 * kMiB);
  ReleaseFreedMemory();
  EXPECT_LT(FreedMemoryHeld(), 64 * kMiB);
}

// What one large Lower through the service leaves held, under `keep`: after
// at least 1.5 seconds (the service looks at what it keeps once a second),
// and until held is under `settle_below` or 5 seconds have passed.
int64_t HeldAfterALargeLower(int64_t keep, int64_t settle_below) {
  ServerConfig config = LoopbackConfig();
  config.keep_freed_bytes = keep;
  config.max_memory_bytes = 0;
  auto server = StartServer(config);
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return -1;
  ReleaseFreedMemory();
  {
    auto client = Connect(server->address());
    absl::StatusOr<v1::LowerResponse> response =
        client->Lower(SyntheticChainRequest(50'000));
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_TRUE(response.ok() && response->ok());
  }
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int64_t held = FreedMemoryHeld();
  while (held >= settle_below && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    held = FreedMemoryHeld();
  }
  return held;
}

TEST(KeepFreedMemory, ALargeLowerLeavesItsFreedPagesForTheNextJob) {
  if (!kJemalloc) {  // the service runs without keeping anything
    EXPECT_EQ(HeldAfterALargeLower(int64_t{1} << 30, INT64_MAX), 0);
    return;
  }
  // A 50k-node Lower frees tens of MB (its parsed request, its IR); with
  // room to keep them they stay for the next job.
  EXPECT_GE(HeldAfterALargeLower(int64_t{1} << 30, INT64_MAX), 32 * kMiB);
}

TEST(KeepFreedMemory, WhatIsBeyondTheBoundIsGivenBack) {
  // With 1 MiB to keep, what the job and the call free is given back: at
  // each point where the job drops a form of the program, and what the
  // call frees after the job (its request, the response once sent) within
  // a second.
  EXPECT_LT(HeldAfterALargeLower(kMiB, 16 * kMiB), 16 * kMiB);
}

TEST(AllocatorOptions, TheExecutablesSetThem) {
  // server/malloc_conf.cc, compiled into the executables that link
  // jemalloc, this one among them.
  const AllocatorOptions options = CurrentAllocatorOptions();
  if (!kJemalloc) {
    EXPECT_EQ(options.huge_pages, "");
    EXPECT_EQ(options.lg_extent_max_active_fit, -1);
    return;
  }
  const char* overridden =
      "(MALLOC_CONF in the environment overrides the executable's options)";
  // jemalloc reads the kernel's mode from this file and says "not
  // supported" where there is none.
  std::ifstream kernel("/sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(options.huge_pages, kernel ? "always" : "not supported")
      << overridden;
  EXPECT_EQ(options.lg_extent_max_active_fit, 12) << overridden;
}

}  // namespace
}  // namespace ferry::testing
