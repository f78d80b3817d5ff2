// The programs of tests/runtime/programs, compiled into the GPU test binary
// (file name -> text), so it needs no source tree.
#ifndef FERRY_TESTS_GPU_EMBEDDED_PROGRAMS_H_
#define FERRY_TESTS_GPU_EMBEDDED_PROGRAMS_H_

#include <map>
#include <string>

namespace ferry::testing {

const std::map<std::string, std::string>& EmbeddedPrograms();

}  // namespace ferry::testing

#endif  // FERRY_TESTS_GPU_EMBEDDED_PROGRAMS_H_
