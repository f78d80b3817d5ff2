// Reading a whole file, for everything that takes a file name: ferryd's
// config, certificates and token file, the client's TLS files and token, the
// tool's inputs and the tests' data. One definition so that every caller
// reports a missing or unreadable file the same way.
#ifndef FERRY_FILE_H_
#define FERRY_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// The bytes of the file at `path`. NotFound when it cannot be opened,
// DataLoss when reading fails (a directory, an I/O error). The message names
// the file, and `what` it is when given:
//   "cannot read --tls-cert 'server.pem': No such file or directory".
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     absl::string_view what = {});

}  // namespace ferry

#endif  // FERRY_FILE_H_
