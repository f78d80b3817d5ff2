// The canonical digests of the ferry.v1 API, computed by one piece of code
// for the server and the C++ client (docs/service.md, "Request digests",
// says how another client computes the same).
//
//   request digest = SHA-256 over length-prefixed parts:
//     "ferry.v1.Compiler/Lower", the server's compiler_version, and the
//     LowerRequest serialized deterministically.
//   blob digest    = SHA-256 of the bytes, and their count (REAPI's Digest).
#ifndef FERRY_DIGEST_H_
#define FERRY_DIGEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "ferry/v1/compiler.pb.h"

namespace ferry {

// Lowercase hex SHA-256 of the concatenation of `parts`, each preceded by
// its length as 8 little-endian bytes, so ("ab","c") and ("a","bc") differ.
std::string Sha256Hex(const std::vector<absl::string_view>& parts);
// Lowercase hex SHA-256 of `bytes` alone.
std::string Sha256HexOf(absl::string_view bytes);

// `message` serialized deterministically (fields in number order, map
// entries sorted by key, unknown fields kept).
std::string DeterministicBytes(const google::protobuf::Message& message);

// The key of `request`'s result for a server whose compiler is
// `compiler_version` (GetCapabilitiesResponse.compiler_version).
std::string LowerRequestDigest(const v1::LowerRequest& request,
                               absl::string_view compiler_version);
// The same for a request in two parts: `rest`, the request without its
// program, and `program`, the program's bytes as the client sent them
// (nullopt when it sent none). The same key as LowerRequestDigest of the
// whole request when those bytes are the program's deterministic form, as
// protobuf's serializers write it; otherwise another key, as for any other
// request (only a cache miss).
std::string LowerRequestDigest(const v1::LowerRequest& rest,
                               std::optional<std::string_view> program,
                               absl::string_view compiler_version);

v1::Digest BlobDigestOf(absl::string_view bytes);
// 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view hash);

}  // namespace ferry

#endif  // FERRY_DIGEST_H_
