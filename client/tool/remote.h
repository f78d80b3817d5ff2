// The `ferry` tool's remote mode: `--server ADDR` (and TLS and token flags)
// sends `lower`, `verify` and `caps` to a ferryd through libferry_client.
// Output and exit codes match the in-process commands byte for byte: a
// malformed program or a compile failure prints the same report; a request
// the server refuses prints its status as an in-process failure with that
// status would (status_report.h).
#ifndef FERRY_CLIENT_TOOL_REMOTE_H_
#define FERRY_CLIENT_TOOL_REMOTE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/tool/commands.h"
#include "client/tool/graph_output.h"
#include "client/tool/progress.h"
#include "ferry/client.h"
#include "ferry/v1/compiler.pb.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ferry::tool {

struct RemoteOptions {
  std::string server;  // empty: run in-process
  bool tls = false;    // --tls, or implied by any --tls-* file
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  std::string token_file;
  int64_t deadline_seconds = 300;

  bool enabled() const { return !server.empty(); }
};

// Declares the remote flags on `app`, to be read into `remote`:
//   --server ADDR  --tls  --tls-ca FILE  --tls-cert FILE  --tls-key FILE
//   --tls-server-name NAME  --token-file FILE  --deadline SECONDS
void AddRemoteFlags(CLI::App& app, RemoteOptions& remote);
// One line per remote flag, for usage texts.
std::string RemoteFlagsHelp();

absl::StatusOr<std::unique_ptr<Client>> ConnectRemote(
    const RemoteOptions& remote);

// `ferry lower --server`: prints (and draws `graph`) as RunLower does.
// Returns the exit code. With `progress` enabled the call streams
// (LowerStream) and prints its progress.
int RemoteLower(const RemoteOptions& remote, const v1::LowerRequest& request,
                const std::string& file, const std::string& out,
                const std::string& report, bool timings,
                const GraphFlags& graph, ProgressPrinter& progress);

// `ferry verify --server`. `device` is "auto", "sim" or "cuda".
int RemoteVerify(const RemoteOptions& remote, const v1::LowerRequest& request,
                 const std::string& file, const std::string& device,
                 uint64_t seed, const std::string& report,
                 ProgressPrinter& progress);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_REMOTE_H_
