#include "client/tool/graph_output.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/tool/commands.h"
#include "client/tool/tool_common.h"
#include "ferry/v1/program.pb.h"
#include "passes/diagnostics.h"
#include "passes/proto_io.h"

extern char** environ;

namespace ferry::tool {
namespace {

// "svg", "png", "pdf" (drawn by dot) or "dot" (the text), from the path.
std::string GraphFormat(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".dot" || ext == ".gv") return "dot";
  if (ext == ".svg" || ext == ".png" || ext == ".pdf") return ext.substr(1);
  return "";
}

// Runs `dot -T<format> -o <out> <in>` with no stdin, killed after the
// timeout.
absl::Status RunDot(const std::string& format, const std::string& in,
                    const std::string& out) {
  std::vector<std::string> argv_strings = {"dot", "-T" + format, "-o", out, in};
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned =
      posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned == ENOENT) {
    return absl::NotFoundError(
        "Graphviz's 'dot' is not on PATH (Debian package graphviz); "
        "--graph=OUT.dot writes the DOT text without it");
  }
  if (spawned != 0)
    return absl::InternalError(
        absl::StrCat("cannot run 'dot': ", std::strerror(spawned)));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(kDotTimeoutSeconds);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR)
      return absl::InternalError("lost the 'dot' process");
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrCat(
          "'dot' ran longer than ", kDotTimeoutSeconds,
          " s and was stopped; --graph-summary draws a smaller picture"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return absl::InternalError(absl::StrCat(
        "'dot' failed (", WIFEXITED(status) ? "exit " : "signal ",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), ")"));
  return absl::OkStatus();
}

// Draws `dot_text` into `path` through a temporary DOT file; the picture
// appears under its name only when dot succeeded.
absl::Status Draw(const std::string& dot_text, const std::string& format,
                  const std::string& path) {
  std::string in =
      (std::filesystem::temp_directory_path() / "ferry-graph-XXXXXX.dot")
          .string();
  const int fd = mkstemps(in.data(), 4);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat("cannot create a temporary file: ", std::strerror(errno)));
  const bool written = write(fd, dot_text.data(), dot_text.size()) ==
                       static_cast<ssize_t>(dot_text.size());
  close(fd);
  const std::string partial = path + ".partial";
  absl::Status status =
      written ? RunDot(format, in, partial)
              : absl::InternalError("cannot write the temporary DOT file");
  std::error_code ignored;
  std::filesystem::remove(in, ignored);
  if (status.ok()) {
    std::error_code error;
    std::filesystem::rename(partial, path, error);
    if (error)
      status =
          absl::InternalError(absl::StrCat("cannot write: ", error.message()));
  }
  if (!status.ok()) std::filesystem::remove(partial, ignored);
  return status;
}

}  // namespace

void AddGraphFlags(CLI::App& app, GraphFlags& flags) {
  app.add_option("--graph", flags.path)->check([](const std::string& path) {
    if (GraphFormat(path).empty())
      return std::string(
          "--graph: OUT must end in .svg, .png, .pdf (drawn by Graphviz's "
          "dot) or .dot/.gv (the DOT text)");
    return std::string();
  });
  app.add_flag("--graph-summary", flags.options.summary);
}

std::string GraphFlagsHelp() {
  return absl::StrCat(
      "  --graph=OUT       draw the lowered placement: OUT.svg/.png/.pdf "
      "with\n"
      "                    Graphviz's dot (killed after ",
      kDotTimeoutSeconds,
      " s), OUT.dot/.gv the DOT text\n"
      "  --graph-summary   one box per delegate and per run of host nodes\n"
      "                    (the default for methods over ",
      GraphOptions{}.summary_above, " nodes)\n");
}

int WriteGraph(const std::string& command, const GraphFlags& flags,
               const Program& lowered) {
  const std::string dot_text = PlacementDot(lowered, flags.options);
  const std::string format = GraphFormat(flags.path);
  if (format == "dot")
    return WriteOutput(flags.path, dot_text) ? kExitOk : kExitUsage;
  const absl::Status status = Draw(dot_text, format, flags.path);
  if (!status.ok()) {
    std::fprintf(stderr, "ferry %s: cannot draw %s: %s\n", command.c_str(),
                 flags.path.c_str(), std::string(status.message()).c_str());
    return kExitUsage;
  }
  return kExitOk;
}

int WriteGraph(const std::string& command, const GraphFlags& flags,
               const v1::Program& lowered) {
  Diagnostics diagnostics;
  const Program program = ImportProgram(lowered, diagnostics);
  if (diagnostics.HasErrors()) {
    std::fprintf(stderr, "ferry %s: the lowered program does not import:\n%s",
                 command.c_str(),
                 FormatDiagnosticsText(diagnostics, "lowered").c_str());
    return kExitErrors;
  }
  return WriteGraph(command, flags, program);
}

}  // namespace ferry::tool
