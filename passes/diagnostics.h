// Diagnostics: every problem a client can cause is data, never an abort.
//
// A Diagnostic carries a stable code (documented in docs/diagnostics.md), a
// message, the names of the nodes it is about (the first is the primary one),
// an optional hint and the method it belongs to.
#ifndef FERRY_PASSES_DIAGNOSTICS_H_
#define FERRY_PASSES_DIAGNOSTICS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace ferry {

enum class Severity { kNote, kWarning, kError };

std::string_view SeverityName(Severity severity);  // "note", "warning", "error"

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string code;  // e.g. "FERRY-E0101"
  std::string message;
  std::vector<std::string> nodes;
  std::string hint;
  std::string method;
};

// An append-only list of diagnostics, in the order they were found.
class Diagnostics {
 public:
  Diagnostic& Add(Severity severity, std::string code, std::string message,
                  std::vector<std::string> nodes = {}, std::string hint = {});
  Diagnostic& Error(std::string code, std::string message,
                    std::vector<std::string> nodes = {},
                    std::string hint = {}) {
    return Add(Severity::kError, std::move(code), std::move(message),
               std::move(nodes), std::move(hint));
  }
  Diagnostic& Warning(std::string code, std::string message,
                      std::vector<std::string> nodes = {},
                      std::string hint = {}) {
    return Add(Severity::kWarning, std::move(code), std::move(message),
               std::move(nodes), std::move(hint));
  }

  // Diagnostics added after this call get `method` unless they set their own.
  void SetMethod(std::string method) { method_ = std::move(method); }

  bool HasErrors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  int warning_count() const { return warnings_; }
  const std::vector<Diagnostic>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  void Append(const Diagnostics& other);

 private:
  std::vector<Diagnostic> items_;
  std::string method_;
  int errors_ = 0;
  int warnings_ = 0;
};

// Compiler-style text: "FILE: method 'm': node 'x': error[CODE]: message"
// followed by "  hint: ..." when there is a hint. One diagnostic per line.
std::string FormatDiagnosticsText(const Diagnostics& diagnostics,
                                  std::string_view file);
// The JSON form is ReportJson of their wire form (report_io.h).

// RET_CHECK-style internal invariant: returns an internal error (never aborts).
#define FERRY_RET_CHECK(cond)                                          \
  do {                                                                 \
    if (!(cond))                                                       \
      return ::absl::InternalError(std::string(__FILE__) + ":" +       \
                                   std::to_string(__LINE__) +          \
                                   ": internal check failed: " #cond); \
  } while (0)

}  // namespace ferry

#endif  // FERRY_PASSES_DIAGNOSTICS_H_
