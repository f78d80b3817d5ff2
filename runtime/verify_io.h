// The verification report (verify.h) in its wire form,
// ferry.v1.VerificationReport (proto/ferry/v1/report.proto). The service
// answers with VerifyReportToProto, a remote `ferry verify --server` reads
// it back with VerifyReportFromProto, and both print it as
// ReportJson(VerifyReportToProto(report)) (passes/report_io.h).
#ifndef FERRY_RUNTIME_VERIFY_IO_H_
#define FERRY_RUNTIME_VERIFY_IO_H_

#include "ferry/v1/report.pb.h"
#include "runtime/verify.h"

namespace ferry {

// Everything but `lowered_outputs` (they travel as an InputSet, if at all);
// `summary` is report.Summary(), one line.
v1::VerificationReport VerifyReportToProto(const VerifyReport& report);
VerifyReport VerifyReportFromProto(const v1::VerificationReport& report);

}  // namespace ferry

#endif  // FERRY_RUNTIME_VERIFY_IO_H_
