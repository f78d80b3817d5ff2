#include "runtime/verify_io.h"

#include <cstdint>
#include <string>
#include <utility>

namespace ferry {

v1::VerificationReport VerifyReportToProto(const VerifyReport& report) {
  v1::VerificationReport out;
  out.set_ok(report.ok);
  out.set_device(report.device);
  out.set_error(report.error);
  out.set_summary(report.Summary());
  for (const HostFallback& fallback : report.host_fallbacks) {
    v1::HostFallback* wire = out.add_host_fallbacks();
    wire->set_op(fallback.op);
    wire->set_count(fallback.count);
  }
  for (const OutputComparison& comparison : report.outputs) {
    v1::OutputComparison* wire = out.add_outputs();
    wire->set_method(comparison.method);
    wire->set_output_index(static_cast<int32_t>(comparison.output_index));
    wire->set_dtype(std::string(comparison.dtype));
    wire->set_match(comparison.match);
    wire->set_mismatched_elements(comparison.mismatched_elements);
    wire->set_first_mismatch_index(comparison.first_mismatch_index);
    wire->set_expected_value(comparison.expected_value);
    wire->set_actual_value(comparison.actual_value);
    wire->set_max_abs_error(comparison.max_abs_error);
    wire->set_max_rel_error(comparison.max_rel_error);
    wire->set_atol(comparison.atol);
    wire->set_rtol(comparison.rtol);
    for (int64_t size : comparison.sizes) wire->add_sizes(size);
    wire->set_elements(comparison.elements);
    for (int64_t i : comparison.max_abs_error_index)
      wire->add_max_abs_error_index(i);
    for (int64_t i : comparison.max_rel_error_index)
      wire->add_max_rel_error_index(i);
  }
  return out;
}

VerifyReport VerifyReportFromProto(const v1::VerificationReport& report) {
  VerifyReport out;
  out.ok = report.ok();
  out.device = report.device();
  out.error = report.error();
  for (const v1::OutputComparison& wire : report.outputs()) {
    OutputComparison comparison;
    comparison.method = wire.method();
    comparison.output_index = wire.output_index();
    comparison.dtype = wire.dtype();
    comparison.match = wire.match();
    comparison.mismatched_elements = wire.mismatched_elements();
    comparison.first_mismatch_index = wire.first_mismatch_index();
    comparison.expected_value = wire.expected_value();
    comparison.actual_value = wire.actual_value();
    comparison.max_abs_error = wire.max_abs_error();
    comparison.max_rel_error = wire.max_rel_error();
    comparison.atol = wire.atol();
    comparison.rtol = wire.rtol();
    comparison.sizes.assign(wire.sizes().begin(), wire.sizes().end());
    comparison.elements = wire.elements();
    comparison.max_abs_error_index.assign(wire.max_abs_error_index().begin(),
                                          wire.max_abs_error_index().end());
    comparison.max_rel_error_index.assign(wire.max_rel_error_index().begin(),
                                          wire.max_rel_error_index().end());
    out.outputs.push_back(std::move(comparison));
  }
  for (const v1::HostFallback& wire : report.host_fallbacks())
    out.host_fallbacks.push_back({wire.op(), wire.count()});
  return out;
}

}  // namespace ferry
