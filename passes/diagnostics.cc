#include "passes/diagnostics.h"

#include <algorithm>

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
                              std::move(nodes), std::move(hint), method_,
                              DiagnosticSource{}});
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
    if (d.source.file.empty()) {
      absl::StrAppend(&out, std::string(file), ":");
    } else {
      absl::StrAppend(&out, d.source.file, ":");
      if (d.source.line > 0) absl::StrAppend(&out, d.source.line, ":");
    }
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

namespace {

constexpr size_t kLongestSuggestedName = 256;

// The optimal-string-alignment distance between `a` and `b` (insertions,
// deletions, substitutions and transpositions of adjacent characters), or
// nullopt when it exceeds `limit`. Adds the table cells it fills to `cells`.
std::optional<size_t> EditDistance(std::string_view a, std::string_view b,
                                   size_t limit, int64_t& cells) {
  // The length difference is a lower bound: most names stop here.
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit)
    return std::nullopt;
  // Three rows of the table: i-2, i-1 and i.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1),
      current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    size_t row_min = current[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min(
          {previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
      row_min = std::min(row_min, current[j]);
    }
    cells += static_cast<int64_t>(b.size());
    // No later row is below this row's minimum.
    if (row_min > limit) return std::nullopt;
    std::swap(before, previous);
    std::swap(previous, current);
  }
  if (previous[b.size()] > limit) return std::nullopt;
  return previous[b.size()];
}

}  // namespace

std::optional<std::string> NameSuggester::Closest(
    std::string_view name, std::span<const std::string> known) {
  if (name.empty() || name.size() > kLongestSuggestedName) return std::nullopt;
  if (cells_left_ <= 0) return std::nullopt;
  // Fewer edits than the name has characters: one-letter names are not
  // each other's misspellings.
  const size_t limit =
      std::min(std::max<size_t>(1, name.size() / 3), name.size() - 1);
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  int64_t cells = 0;
  for (const std::string& candidate : known) {
    ++cells;  // the comparison itself, for names that stop at the length
    if (cells > cells_left_) break;
    if (candidate == name) continue;  // not a misspelling of itself
    std::optional<size_t> distance =
        EditDistance(name, candidate, limit, cells);
    if (!distance.has_value()) continue;
    if (*distance < best_distance ||
        (*distance == best_distance && candidate < *best)) {
      best = &candidate;
      best_distance = *distance;
    }
  }
  // A search cut short would give a hint that depends on the budget.
  if (cells > cells_left_) {
    cells_left_ = 0;
    return std::nullopt;
  }
  cells_left_ -= cells;
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string NameSuggester::DidYouMean(std::string_view name,
                                      std::span<const std::string> known) {
  std::optional<std::string> closest = Closest(name, known);
  return closest.has_value() ? DidYouMeanText(*closest) : std::string();
}

std::string DidYouMeanText(std::string_view suggestion) {
  return absl::StrCat("did you mean '", std::string(suggestion), "'?");
}

std::string DidYouMean(std::string_view name,
                       std::span<const std::string> known) {
  return NameSuggester().DidYouMean(name, known);
}

}  // namespace ferry
