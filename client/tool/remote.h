// The `ferry` tool's remote mode: `--server ADDR` (and TLS and token flags)
// sends `lower`, `verify` and `caps` to a ferryd through libferry_client.
// Output and exit codes match the in-process commands: a compile failure
// prints the same report; a request the server refuses prints the status
// and its google.rpc details.
#ifndef FERRY_CLIENT_TOOL_REMOTE_H_
#define FERRY_CLIENT_TOOL_REMOTE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/tool/commands.h"
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

// `ferry lower --server`: prints as RunLower does. Returns the exit code.
// With `progress` enabled the call streams (LowerStream) and prints its
// progress.
int RemoteLower(const RemoteOptions& remote, const v1::LowerRequest& request,
                const std::string& file, const std::string& out,
                const std::string& report, ProgressPrinter& progress);

// `ferry verify --server`. `device` is "auto", "sim" or "cuda".
int RemoteVerify(const RemoteOptions& remote, const v1::LowerRequest& request,
                 const std::string& file, const std::string& device,
                 uint64_t seed, const std::string& report,
                 ProgressPrinter& progress);

// Prints a refused call ("ferry CMD: SERVER: CODE: message" and one line per
// detail) and returns the exit code for it: 1 for a refused request (over a
// limit, an input that does not fit, ...) and transport failures, 3 for a
// missing device. A malformed program is not a refused call: its
// diagnostics come back in the response and are printed as in-process.
int ReportRpcError(const std::string& command, const RemoteOptions& remote,
                   const std::string& file, const absl::Status& status);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_REMOTE_H_
