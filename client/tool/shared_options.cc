#include "client/tool/shared_options.h"

#include <cstdio>
#include <string>
#include <utility>

namespace ferry::tool {
namespace {

// "--allow-op OP" / "--allow-op=OP" (repeatable): appends OP to the
// partitioner's operator list; the pipeline rejects unknown names.
bool ParseOperatorListFlag(const Args& args, size_t* i, std::string_view name,
                           google::protobuf::RepeatedPtrField<std::string>* ops,
                           std::string* error) {
  const std::string& arg = args[*i];
  std::string value;
  if (arg == name) {
    if (*i + 1 >= args.size()) {
      *error = std::string(name) + " needs an operator, e.g. aten::relu_";
      return true;
    }
    value = args[++*i];
  } else if (!ParseFlag(arg, name, &value) || arg.size() == name.size()) {
    return false;
  }
  if (value.empty()) {
    *error = std::string(name) + " needs an operator, e.g. aten::relu_";
    return true;
  }
  ops->Add(std::move(value));
  return true;
}

}  // namespace

Parsed ParseSharedOption(const Args& args, size_t* i, std::string_view command,
                         const std::string& usage, SharedOptions* options) {
  const std::string& arg = args[*i];
  const std::string name(command);
  std::string value, error;
  if (ParseFlag(arg, "--format", &value)) {
    options->format = value;
  } else if (ParseFlag(arg, "--report", &value)) {
    options->report = value;
  } else if (ParseOperatorListFlag(args, i, "--allow-op",
                                   options->overrides.mutable_partitioner()
                                       ->mutable_allow_operators(),
                                   &error) ||
             ParseOperatorListFlag(args, i, "--deny-op",
                                   options->overrides.mutable_partitioner()
                                       ->mutable_deny_operators(),
                                   &error) ||
             ParseRemoteFlag(args, i, &options->remote, &error) ||
             ApplyLoweringFlag(arg, &options->overrides, &error)) {
    if (!error.empty()) {
      std::fprintf(stderr, "ferry %s: %s\n", name.c_str(), error.c_str());
      return Parsed::kUsageError;
    }
  } else if (!arg.empty() && arg[0] == '-') {
    std::fprintf(stderr, "ferry %s: unknown option '%s'\n\n%s", name.c_str(),
                 arg.c_str(), usage.c_str());
    return Parsed::kUsageError;
  } else if (options->file.empty()) {
    options->file = arg;
  } else {
    std::fprintf(stderr, "ferry %s: one FILE only\n", name.c_str());
    return Parsed::kUsageError;
  }
  return Parsed::kTaken;
}

}  // namespace ferry::tool
