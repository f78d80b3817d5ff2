#include "passes/diagnostics.h"

#include "absl/strings/str_cat.h"

namespace ferry {

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kNote:
      return "note";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

Diagnostic& Diagnostics::Add(Severity severity, std::string code,
                             std::string message,
                             std::vector<std::string> nodes, std::string hint) {
  if (severity == Severity::kError) ++errors_;
  if (severity == Severity::kWarning) ++warnings_;
  items_.push_back(Diagnostic{severity, std::move(code), std::move(message),
                              std::move(nodes), std::move(hint), method_});
  return items_.back();
}

void Diagnostics::Append(const Diagnostics& other) {
  for (const Diagnostic& d : other.items_) {
    if (d.severity == Severity::kError) ++errors_;
    if (d.severity == Severity::kWarning) ++warnings_;
    items_.push_back(d);
  }
}

std::string FormatDiagnosticsText(const Diagnostics& diagnostics,
                                  std::string_view file) {
  std::string out;
  for (const Diagnostic& d : diagnostics.items()) {
    absl::StrAppend(&out, std::string(file), ":");
    if (!d.method.empty()) absl::StrAppend(&out, " method '", d.method, "':");
    if (!d.nodes.empty()) absl::StrAppend(&out, " node '", d.nodes[0], "':");
    absl::StrAppend(&out, " ", std::string(SeverityName(d.severity)), "[",
                    d.code, "]: ", d.message, "\n");
    if (d.nodes.size() > 1) {
      absl::StrAppend(&out, "  also:");
      for (size_t i = 1; i < d.nodes.size(); ++i)
        absl::StrAppend(&out, " '", d.nodes[i], "'");
      absl::StrAppend(&out, "\n");
    }
    if (!d.hint.empty()) absl::StrAppend(&out, "  hint: ", d.hint, "\n");
  }
  return out;
}

}  // namespace ferry
