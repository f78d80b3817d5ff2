// Resolution of the wire options (ferry.v1.LowerOptions): each malformed
// option is a diagnostic, so that one request reports all of them.
#include "passes/options.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "passes/diagnostic_codes.h"
#include "passes/schema.h"

namespace ferry {

bool LowerOptions::MethodFlag::For(std::string_view method) const {
  for (const auto& [name, value] : per_method)
    if (name == method) return value;
  return default_value;
}

const std::vector<std::string>* BackendOperators::For(
    std::string_view backend) const {
  for (const auto& [id, operators] : by_backend) {
    if (id == backend) return &operators;
  }
  return nullptr;
}

namespace {

LowerOptions::MethodFlag ResolveFlag(const v1::MethodFlag& proto,
                                     std::string_view option,
                                     const Program& program,
                                     Diagnostics& diagnostics) {
  LowerOptions::MethodFlag flag;
  flag.default_value = proto.default_value();
  std::map<std::string, bool> sorted(proto.per_method().begin(),
                                     proto.per_method().end());
  for (const auto& [name, value] : sorted) {
    bool exists = false;
    for (const Method& m : program.methods) exists |= m.name == name;
    if (!exists)
      diagnostics.Warning(
          codes::kUnknownMethodOverride,
          absl::StrCat(std::string(option), " names method '", name,
                       "', which the program does not have"),
          {}, "check the method name");
    flag.per_method.emplace_back(name, value);
  }
  return flag;
}

bool AnySet(const LowerOptions::MethodFlag& flag) {
  if (flag.default_value) return true;
  for (const auto& [name, value] : flag.per_method)
    if (value) return true;
  return false;
}

}  // namespace

LowerOptions ResolveOptions(const v1::LowerOptions& proto,
                            const Program& program, Diagnostics& diagnostics) {
  LowerOptions options;
  options.skip_h2d_for_method_inputs =
      ResolveFlag(proto.skip_h2d_for_method_inputs(),
                  "skip_h2d_for_method_inputs", program, diagnostics);
  options.skip_d2h_for_method_outputs =
      ResolveFlag(proto.skip_d2h_for_method_outputs(),
                  "skip_d2h_for_method_outputs", program, diagnostics);
  options.error_on_per_call_copies = proto.error_on_per_call_copies();
  if (proto.has_enable_non_cpu_memory_planning())
    options.enable_non_cpu_memory_planning =
        proto.enable_non_cpu_memory_planning();
  if (proto.has_alloc_graph_input())
    options.alloc_graph_input = proto.alloc_graph_input();
  if (proto.has_alloc_graph_output())
    options.alloc_graph_output = proto.alloc_graph_output();
  switch (proto.constant_staging()) {
    case v1::PER_CALL:
      break;
    case v1::AT_LOAD:
      options.constant_staging_at_load = true;
      break;
    default:
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat("unknown constant_staging value ",
                       static_cast<int>(proto.constant_staging())),
          {}, "use PER_CALL or AT_LOAD");
  }
  if (!options.enable_non_cpu_memory_planning &&
      (AnySet(options.skip_h2d_for_method_inputs) ||
       AnySet(options.skip_d2h_for_method_outputs)))
    diagnostics.Error(
        codes::kBadOption,
        "skip_h2d_for_method_inputs / skip_d2h_for_method_outputs need "
        "enable_non_cpu_memory_planning",
        {}, "turn device memory planning on, or drop the skip options");
  const v1::PartitionerOptions& p = proto.partitioner();
  switch (p.kind()) {
    case v1::BY_TAG:
      options.partitioner = LowerOptions::Partitioner::kByTag;
      break;
    case v1::BY_CAPABILITY:
      options.partitioner = LowerOptions::Partitioner::kByCapability;
      break;
    case v1::NONE:
      options.partitioner = LowerOptions::Partitioner::kNone;
      break;
    default:
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat("unknown partitioner kind ", static_cast<int>(p.kind())),
          {}, "use BY_TAG, BY_CAPABILITY or NONE");
  }
  if (!p.target_device().empty()) options.partition_target = p.target_device();
  auto check_target = [&](const std::string& text, std::string_view what) {
    absl::StatusOr<Device> d = ParseTargetDevice(text);
    if (!d.ok())
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat(std::string(what), ": ", d.status().message()), {},
          HintOr(DidYouMeanDevice(text),
                 "devices are written 'cuda:N' or 'cpu'"));
  };
  check_target(options.partition_target, "partitioner.target_device");
  std::map<std::string, std::string> tags(p.tag_targets().begin(),
                                          p.tag_targets().end());
  for (const auto& [tag, target] : tags) {
    check_target(target, absl::StrCat("partitioner.tag_targets['", tag, "']"));
    options.tag_targets.emplace_back(tag, target);
  }
  options.partition_backend = p.backend();
  // Operator lists: registry names (".default" accepted), sorted.
  NameSuggester suggester;
  auto resolve_operators = [&](const auto& names, std::string_view what,
                               std::vector<std::string>& out) {
    for (const std::string& name : names) {
      const OpInfo* info = LookupOp(name);
      if (info == nullptr) {
        diagnostics.Error(
            codes::kBadOption,
            absl::StrCat(std::string(what), ": unknown operator '", name, "'"),
            {},
            HintOr(suggester.DidYouMean(name, RegisteredOps()),
                   "name registered operators, e.g. 'aten::relu_' "
                   "(docs/operators.md)"));
        continue;
      }
      out.push_back(info->schema->QualifiedName());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  };
  resolve_operators(p.allow_operators(), "partitioner.allow_operators",
                    options.allow_operators);
  resolve_operators(p.deny_operators(), "partitioner.deny_operators",
                    options.deny_operators);
  return options;
}

}  // namespace ferry
