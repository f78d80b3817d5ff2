// ferry: check, format, lower and verify Ferry programs, in-process or
// through a ferryd server (--server ADDR).
#include <cstdio>
#include <exception>
#include <string>

#include "client/tool/commands.h"
#include "ferry/version.h"

namespace {

constexpr char kUsage[] =
    "usage: ferry COMMAND [options] FILE\n"
    "\n"
    "commands:\n"
    "  check FILE    validate a Program or LowerRequest; print diagnostics\n"
    "  fmt FILE      print the canonical text form\n"
    "  lower FILE    run the lowering pipeline; print the lowered program\n"
    "  verify FILE   lower, execute and compare with eager host execution\n"
    "  caps          ask a server for its capabilities (--server ADDR)\n"
    "  show FILE     summarise a lowered program; --graph=OUT.svg draws it\n"
    "\n"
    "FILE is text (.textproto, .txtpb), binary (.pb, .binpb) or JSON (.json);\n"
    "--format=text|binary|json overrides the extension. 'ferry COMMAND "
    "--help' for more.\n"
    "'ferry --version' prints the compiler and API versions (as 'ferryd\n"
    "--version' and 'ferry caps' do).\n"
    "\n"
    "exit codes:\n"
    "  0  ok (warnings allowed)\n"
    "  1  the program has errors, outputs differ, or the request is over a\n"
    "     fixed limit (RESOURCE_EXHAUSTED without RetryInfo, "
    "INVALID_ARGUMENT)\n"
    "  2  usage error, unreadable input, bad credentials (UNAUTHENTICATED)\n"
    "  3  the requested device is not available (FAILED_PRECONDITION)\n"
    "  4  retry later: server unreachable or draining (UNAVAILABLE), busy\n"
    "     (RESOURCE_EXHAUSTED with RetryInfo), DEADLINE_EXCEEDED, CANCELLED\n"
    "  5  internal error (INTERNAL, UNKNOWN, DATA_LOSS, anything unexpected)\n";

// Every subcommand, with what it may throw (CLI11, the standard library)
// turned into exit code 5 rather than an abort.
int Run(const std::string& command, const ferry::tool::Args& args) {
  if (command == "check") return ferry::tool::RunCheck(args);
  if (command == "fmt") return ferry::tool::RunFmt(args);
  if (command == "lower") return ferry::tool::RunLower(args);
  if (command == "verify") return ferry::tool::RunVerify(args);
  if (command == "caps") return ferry::tool::RunCaps(args);
  if (command == "show") return ferry::tool::RunShow(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return ferry::tool::kExitOk;
  }
  if (command == "--version") {
    std::printf("ferry %s (API %s)\n", ferry::kCompilerVersion,
                ferry::kApiVersion);
    return ferry::tool::kExitOk;
  }
  std::fprintf(stderr, "ferry: unknown command '%s'\n\n%s", command.c_str(),
               kUsage);
  return ferry::tool::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return ferry::tool::kExitUsage;
  }
  const std::string command = argv[1];
  try {
    return Run(command, ferry::tool::Args(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry %s: internal error: %s\n", command.c_str(),
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "ferry %s: internal error\n", command.c_str());
  }
  return ferry::tool::kExitInternal;
}
