// A small reader for the YAML the deployment manifests use: block mappings
// and sequences (including "- key: value" items and sequences at their
// parent key's indentation, as kubectl prints them), plain and quoted
// scalars, `|`/`>` block scalars, `[a, b]` flow sequences of scalars, `{}`,
// comments and `---` between documents. Anchors, tags and multi-line flow
// collections are not supported and are reported as errors.
#ifndef FERRY_TESTS_DEPLOY_MINI_YAML_H_
#define FERRY_TESTS_DEPLOY_MINI_YAML_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::testing {

struct Yaml {
  enum class Kind { kNull, kScalar, kMap, kList };
  Kind kind = Kind::kNull;
  std::string scalar;
  std::vector<std::pair<std::string, Yaml>> map;  // in document order
  std::vector<Yaml> list;

  // The value at a dotted path of keys and [indices], e.g.
  // "spec.template.spec.containers[0].name"; null when absent.
  const Yaml* Find(std::string_view path) const;
  // The scalar at `path`, or "" when absent or not a scalar.
  std::string Str(std::string_view path) const;
  bool Has(std::string_view path) const { return Find(path) != nullptr; }
};

// Parses a stream of documents.
absl::StatusOr<std::vector<Yaml>> ParseYamlDocuments(std::string_view text);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_DEPLOY_MINI_YAML_H_
