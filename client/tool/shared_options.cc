#include "client/tool/shared_options.h"

#include <string>
#include <vector>

namespace ferry::tool {
namespace {

// "--allow-op OP" / "--allow-op=OP" (repeatable): appends OP to the
// partitioner's operator list; the pipeline rejects unknown names. The value
// is optional to CLI11 so that a missing one gets this message.
void AddOperatorListFlag(CLI::App& app, const std::string& name,
                         google::protobuf::RepeatedPtrField<std::string>* ops) {
  app.add_option_function<std::vector<std::string>>(
         name,
         [name, ops](const std::vector<std::string>& values) {
           for (const std::string& value : values) {
             if (value.empty()) {
               throw CLI::ValidationError(
                   name + " needs an operator, e.g. aten::relu_");
             }
             ops->Add(std::string(value));
           }
         })
      ->expected(0, 1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// `--NAME` for every method, `--NAME=METHOD` for one (repeatable); a method
// only after '=', so that a FILE after the flag stays FILE. CLI11 gives the
// bare flag the value in braces, "*", which no method is named.
void AddMethodFlag(CLI::App& app, const std::string& name,
                   v1::MethodFlag* flag) {
  app.add_flag(name + "{*}")->each([flag](const std::string& method) {
    if (method == "*") {
      flag->set_default_value(true);
    } else {
      (*flag->mutable_per_method())[method] = true;
    }
  });
}

// The lowering flags, applied to `options` (the request's options, so flags
// override the file).
void AddLoweringFlags(CLI::App& app, v1::LowerOptions& options) {
  v1::PartitionerOptions* partitioner = options.mutable_partitioner();
  AddMethodFlag(app, "--skip-h2d-inputs",
                options.mutable_skip_h2d_for_method_inputs());
  AddMethodFlag(app, "--skip-d2h-outputs",
                options.mutable_skip_d2h_for_method_outputs());
  app.add_flag_callback("--error-on-per-call-copies",
                        [&] { options.set_error_on_per_call_copies(true); });
  app.add_option_function<std::string>(
      "--constant-staging", [&](const std::string& value) {
        if (value == "at-load") {
          options.set_constant_staging(v1::AT_LOAD);
        } else if (value == "per-call") {
          options.set_constant_staging(v1::PER_CALL);
        } else {
          static const std::string kValues[] = {"at-load", "per-call"};
          throw CLI::ValidationError(WithDidYouMean(
              "--constant-staging takes at-load or per-call", value, kValues));
        }
      });
  app.add_flag_callback("--no-device-memory-planning", [&] {
    options.set_enable_non_cpu_memory_planning(false);
  });
  app.add_flag_callback("--no-alloc-graph-input",
                        [&] { options.set_alloc_graph_input(false); });
  app.add_flag_callback("--no-alloc-graph-output",
                        [&] { options.set_alloc_graph_output(false); });
  app.add_option_function<std::string>(
      "--partitioner", [partitioner](const std::string& value) {
        if (value == "tag") {
          partitioner->set_kind(v1::BY_TAG);
        } else if (value == "capability") {
          partitioner->set_kind(v1::BY_CAPABILITY);
        } else if (value == "none") {
          partitioner->set_kind(v1::NONE);
        } else {
          static const std::string kValues[] = {"tag", "capability", "none"};
          throw CLI::ValidationError(WithDidYouMean(
              "--partitioner takes tag, capability or none", value, kValues));
        }
      });
  app.add_option_function<std::string>(
      "--target-device", [partitioner](const std::string& value) {
        if (value.empty()) {
          throw CLI::ValidationError(
              "--target-device needs a device, e.g. cuda:0");
        }
        partitioner->set_target_device(value);
      });
  app.add_option_function<std::vector<std::string>>(
         "--tag-target",
         [partitioner](const std::vector<std::string>& values) {
           for (const std::string& value : values) {
             size_t eq = value.find('=');
             if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
               throw CLI::ValidationError("--tag-target takes TAG=DEVICE");
             }
             (*partitioner->mutable_tag_targets())[value.substr(0, eq)] =
                 value.substr(eq + 1);
           }
         })
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option_function<std::string>("--backend",
                                       [partitioner](const std::string& value) {
                                         partitioner->set_backend(value);
                                       });
  AddOperatorListFlag(app, "--allow-op",
                      partitioner->mutable_allow_operators());
  AddOperatorListFlag(app, "--deny-op", partitioner->mutable_deny_operators());
}

}  // namespace

void AddSharedOptions(CommandFlags& flags, SharedOptions& options) {
  flags.AddFile(options.file);
  flags.app().add_option("--format", options.format);
  flags.app().add_option("--report", options.report);
  AddLoweringFlags(flags.app(), options.overrides);
  AddRemoteFlags(flags.app(), options.remote);
}

std::string LoweringFlagsHelp() {
  return "lowering options (override the request's):\n"
         "  --skip-h2d-inputs[=METHOD]    inputs arrive on their device\n"
         "  --skip-d2h-outputs[=METHOD]   outputs stay on their device\n"
         "  --error-on-per-call-copies    per-call-copy warnings become "
         "errors\n"
         "  --constant-staging=at-load|per-call\n"
         "  --no-device-memory-planning   record placements only\n"
         "  --no-alloc-graph-input        do not plan method inputs\n"
         "  --no-alloc-graph-output       do not plan method outputs\n"
         "  --partitioner=tag|capability|none\n"
         "  --target-device=DEV           capability partitions' device "
         "(cuda:0)\n"
         "  --tag-target=TAG=DEV          device of a tag's partition\n"
         "  --backend=ID                  backend id of new modules\n"
         "  --allow-op OP                 capability partitioner claims only "
         "these (repeatable)\n"
         "  --deny-op OP                  never claimed, stays on the host, "
         "e.g. aten::relu_ (repeatable)\n";
}

}  // namespace ferry::tool
