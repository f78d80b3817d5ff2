// Synthetic programs of a chosen size, for the service's end-to-end tests
// and the load generator (bench/loadgen.cc).
//
// A chain over two user inputs a and b (f32[8,8]): groups of
// `ops_per_partition` operators tagged for one cuda:0 partition each
// (h = add(h, b), h = mul(h, a), h = relu(h), repeating), each group
// followed by one host operator (h = sin(h)), then the output. Every group
// becomes one delegate with an H2D for h and a D2H for its result, so every
// pass has work proportional to the size.
#ifndef FERRY_CLIENT_TESTING_SYNTHETIC_PROGRAM_H_
#define FERRY_CLIENT_TESTING_SYNTHETIC_PROGRAM_H_

#include <cstdint>
#include <string>

#include "ferry/v1/program.pb.h"

namespace ferry::testing {

// About `nodes` nodes (at least 5) in one method. Requests with different
// `variant`s differ (the method is named "forward_<variant>"), so they do
// not share cache entries.
v1::LowerRequest SyntheticChainRequest(int64_t nodes, int variant = 0,
                                       int ops_per_partition = 3);

// The smallest program that lowers: one tagged add and a host relu.
v1::LowerRequest TinyRequest(int variant = 0);

}  // namespace ferry::testing

#endif  // FERRY_CLIENT_TESTING_SYNTHETIC_PROGRAM_H_
