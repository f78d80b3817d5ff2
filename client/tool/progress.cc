#include "client/tool/progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "CLI/CLI.hpp"

namespace ferry::tool {

void AddProgressFlag(CLI::App& app, std::string& mode) {
  app.add_option("--progress", mode)
      ->check(CLI::IsMember({"auto", "always", "never"}));
}

std::string ProgressFlagHelp() {
  return "  --progress=auto|always|never   a line on stderr per finished pass "
         "and\n"
         "                           verification step (auto: when stderr "
         "is a terminal)\n";
}

ProgressPrinter::ProgressPrinter(std::string command, const std::string& mode)
    : command_(std::move(command)),
      enabled_(mode == "always" || (mode == "auto" && isatty(STDERR_FILENO))),
      passes_total_(static_cast<int>(PipelinePassNames().size())) {}

ProgressFn ProgressPrinter::Stages() {
  if (!enabled_) return {};
  return [this](const StageEvent& event) {
    if (event.finished)
      Finished(std::string(event.stage), std::string(event.method),
               event.micros);
  };
}

ProgressCallback ProgressPrinter::Updates() {
  if (!enabled_) return {};
  return [this](const v1::ProgressUpdate& update) { Update(update); };
}

void ProgressPrinter::Update(const v1::ProgressUpdate& update) {
  if (update.stage() == v1::ProgressUpdate::STAGE_QUEUED &&
      update.queue_position() > 0 && !queued_printed_) {
    queued_printed_ = true;
    std::fprintf(stderr, "ferry %s: queued behind %lld jobs\n",
                 command_.c_str(),
                 static_cast<long long>(update.queue_position()));
  }
  // A retried call starts over: its stages are printed again.
  if (update.finished_size() < printed_) {
    printed_ = 0;
    passes_done_ = 0;
  }
  for (; printed_ < update.finished_size(); ++printed_) {
    const v1::StageTiming& stage = update.finished(printed_);
    Finished(stage.stage(), stage.method(), stage.micros());
  }
}

void ProgressPrinter::Finished(const std::string& stage,
                               const std::string& method, int64_t micros) {
  double ms = static_cast<double>(micros) / 1000.0;
  if (method.empty()) {
    ++passes_done_;
    std::fprintf(stderr, "ferry %s: [%d/%d] %s %.2f ms\n", command_.c_str(),
                 passes_done_, passes_total_, stage.c_str(), ms);
  } else {
    std::fprintf(stderr, "ferry %s: %s: %s %.2f ms\n", command_.c_str(),
                 method.c_str(), stage.c_str(), ms);
  }
  std::fflush(stderr);
}

}  // namespace ferry::tool
