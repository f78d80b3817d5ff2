// Diagnostics: every problem a client can cause is data, never an abort.
//
// A Diagnostic carries a stable code (documented in docs/diagnostics.md), a
// message, the names of the nodes it is about (the first is the primary one),
// an optional hint and the method it belongs to.
#ifndef FERRY_PASSES_DIAGNOSTICS_H_
#define FERRY_PASSES_DIAGNOSTICS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace ferry {

enum class Severity { kNote, kWarning, kError };

std::string_view SeverityName(Severity severity);  // "note", "warning", "error"

// Where the primary node came from in the user's source (Node.source: a
// frontend's file and line, e.g. the PyTorch model's own line).
struct DiagnosticSource {
  std::string file;  // empty: unknown
  int32_t line = 0;  // 0: unknown
  std::string name;  // the value's name in the source program, if any
};

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string code;  // e.g. "FERRY-E0101"
  std::string message;
  std::vector<std::string> nodes;
  std::string hint;
  std::string method;
  DiagnosticSource source;  // of nodes[0]; AttachNodeSources (report_io.h)
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
  // For filling in facts found after the fact (AttachNodeSources).
  std::vector<Diagnostic>& mutable_items() { return items_; }
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
// A diagnostic whose primary node has a source location starts with that
// location instead of FILE, as gcc and clang do: "model.py:42: method 'm':
// node 'x': error[CODE]: message" ("model.py:" when the line is unknown).
std::string FormatDiagnosticsText(const Diagnostics& diagnostics,
                                  std::string_view file);
// The JSON form is ReportJson of their wire form (report_io.h).

// Hints for names that name nothing (an operator, a value, an option, a
// device): "did you mean 'X'?" with the closest known name when it is a
// likely typo, else "". Close means an optimal-string-alignment
// (Damerau-Levenshtein) distance of at most max(1, |name| / 3) edits, and
// fewer than |name| (no one-letter name suggests another); ties
// go to the name that sorts first, so a hint does not depend on the order
// of the known names. Names over 256 characters get none.
//
// One suggester serves one request (or one import): it stops suggesting
// once it has spent a fixed amount of work (cells of the distance table),
// so that a request misspelling a million names against a million known
// ones costs no more than a few hints.
class NameSuggester {
 public:
  // The closest of `known` to `name`, if one is close.
  std::optional<std::string> Closest(std::string_view name,
                                     std::span<const std::string> known);
  // "did you mean 'X'?" for Closest(name, known), or "".
  std::string DidYouMean(std::string_view name,
                         std::span<const std::string> known);

 private:
  int64_t cells_left_ = int64_t{1} << 26;  // about 0.1 s of work
};

// One hint from a fresh suggester (for short lists: options, devices).
std::string DidYouMean(std::string_view name,
                       std::span<const std::string> known);
// "did you mean 'X'?" for a suggestion X made some other way.
std::string DidYouMeanText(std::string_view suggestion);
// `hint` (a DidYouMean), or `otherwise` when it is empty.
inline std::string HintOr(std::string hint, std::string otherwise) {
  return hint.empty() ? otherwise : hint;
}

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
