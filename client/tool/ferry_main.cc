// ferry: check, format, lower and verify Ferry programs, in-process or
// through a ferryd server (--server ADDR).
#include <cstdio>
#include <string>

#include "client/tool/commands.h"

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
    "exit codes: 0 ok, 1 errors or mismatch, 2 usage or unreadable input,\n"
    "3 requested device not available\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return ferry::tool::kExitUsage;
  }
  const std::string command = argv[1];
  ferry::tool::Args args(argv + 2, argv + argc);
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
  std::fprintf(stderr, "ferry: unknown command '%s'\n\n%s", command.c_str(),
               kUsage);
  return ferry::tool::kExitUsage;
}
