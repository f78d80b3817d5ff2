// The compiler and API versions: reported by GetCapabilities, `ferryd
// --version` and `ferry --version`, stamped on every response and mixed
// into the result-cache key, so a new compiler never serves an old
// compiler's results. Here, beside the protos, because the server and the
// tool both print them and neither may include the other.
#ifndef FERRY_PROTO_FERRY_VERSION_H_
#define FERRY_PROTO_FERRY_VERSION_H_

namespace ferry {

// Bump on any change that can alter a lowered program or its diagnostics.
inline constexpr char kCompilerVersion[] = "ferry-0.2.1";
// Semantic version of the ferry.v1 wire API (proto/ferry/v1/compiler.proto).
inline constexpr char kApiVersion[] = "1.0.0";

}  // namespace ferry

#endif  // FERRY_PROTO_FERRY_VERSION_H_
