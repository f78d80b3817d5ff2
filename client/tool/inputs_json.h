// `ferry verify --inputs FILE.json`: an InputSet in protobuf's JSON mapping
// (data as base64 little-endian bytes), or with readable numbers instead:
//   {"values": [{"method": "forward", "input": "a",
//                "spec": {"dtype": "F32", "sizes": [2, 3]},
//                "numbers": [[1, 2, 3], [4, 5, 6]]}]}
// "numbers" is nested by shape or flat (row-major), converted to the dtype
// (integers and BOOL must be whole numbers; true/false are 1/0). Sizes are
// bounded (kMaxInputsJsonBytes, kMaxInputElements) and every error names the
// file and the input.
#ifndef FERRY_CLIENT_TOOL_INPUTS_JSON_H_
#define FERRY_CLIENT_TOOL_INPUTS_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ferry/v1/program.pb.h"

namespace ferry::tool {

inline constexpr int64_t kMaxInputsJsonBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxInputElements = int64_t{1} << 24;

// Parses `json` (the contents of `path`) into `inputs`.
absl::Status ParseInputsJson(const std::string& path, const std::string& json,
                             v1::InputSet* inputs);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_INPUTS_JSON_H_
