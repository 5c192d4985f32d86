// `npuscope advise`: the advisor's findings (analysis/advisor.h) over a run, as text or JSON.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "npuscope/analysis/advisor.h"
#include "npuscope/store/damage_warning.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {
namespace {

struct AdviseOptions {
  std::string file;
  int64_t run = -1;
  bool json = false;
};

int runAdvise(const AdviseOptions& o) {
  auto reader = TraceReader::open(o.file);
  if (!reader.isOk()) return fail(reader.status().message());
  DamageWarning damage(**reader);
  auto run = pickRun(**reader, o.run);
  if (!run.isOk()) return fail(run.status().message());
  auto findings = advise(**reader, run->id);
  if (!findings.isOk()) return fail(findings.status().message());
  if (o.json) {
    nlohmann::json j;
    j["run"] = run->id;
    j["findings"] = nlohmann::json::array();
    for (const Finding& f : *findings) {
      j["findings"].push_back({{"rule", f.rule},
                               {"severity", severityName(f.severity)},
                               {"title", f.title},
                               {"evidence", f.evidence},
                               {"suggestion", f.suggestion},
                               {"ops", f.ops},
                               {"steps", f.steps}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("npuscope advise: run %lld  %s  %s %s%s\n\n", static_cast<long long>(run->id), run->command.c_str(),
              run->model.c_str(), run->opt_level.c_str(),
              run->imported() ? (" (imported from " + run->source_path + ")").c_str() : "");
  if (findings->empty()) {
    std::printf("No findings: none of the advisor's rules fired on this run.\n");
    return 0;
  }
  for (const Finding& f : *findings) {
    std::printf("[%s] %s  (%s)\n", severityName(f.severity), f.title.c_str(), f.rule.c_str());
    std::printf("    evidence:   %s\n", f.evidence.c_str());
    std::printf("    suggestion: %s\n\n", f.suggestion.c_str());
  }
  std::printf("%zu finding(s)\n", findings->size());
  return 0;
}

}  // namespace

void addAdviseCommand(Commands& cli) {
  auto o = std::make_shared<AdviseOptions>();
  AdviseOptions& adv = *o;
  auto* advise_cmd = cli.app().add_subcommand(
      "advise", "Findings over a run (recorded or imported): ops a real device would not run natively, dynamic "
                "shapes, cast overhead, skipped steps, loss-scale collapse or oscillation, memory near capacity");
  advise_cmd->add_option("file", adv.file, "Trace file")->required();
  advise_cmd->add_option("--run", adv.run, "Run id (default: the latest run)");
  advise_cmd->add_flag("--json", adv.json, "The findings as JSON on stdout");
  cli.onParsed(advise_cmd, [o] { return runAdvise(*o); });
}

}  // namespace npuscope::cli
