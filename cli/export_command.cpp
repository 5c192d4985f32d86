// `npuscope export`: a run as a chrome trace (Perfetto, split when large), its op table as CSV, or
// torch_npu's *_ascend_pt folder (MindStudio Insight, msprof-analyze).
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "npuscope/analysis/ascend_pt_export.h"
#include "npuscope/analysis/chrome_trace.h"
#include "npuscope/analysis/op_table_csv.h"
#include "npuscope/store/damage_warning.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {
namespace {

struct ExportOptions {
  std::string file;
  int64_t run = -1;
  std::string chrome;  // output path of the chrome trace
  std::string csv;     // output path of the op table as CSV
  std::string ascend_pt;  // a *_ascend_pt folder, or the folder to make one in
  std::string steps;      // "A-B" or "N": only these steps (ascend_pt)
  int64_t max_file_mb = 256;
};

int runExport(const ExportOptions& o) {
  if (o.chrome.empty() && o.csv.empty() && o.ascend_pt.empty()) {
    return fail("export: nothing to do (give --chrome OUT.json, --csv OUT.csv and/or --ascend-pt DIR)");
  }
  std::optional<StepRange> steps;
  if (!o.steps.empty()) {
    // Whole non-negative numbers only: "2-x", "-2" and "5-3" are refused.
    auto number = [](const std::string& t, int64_t* v) {
      if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos) return false;
      *v = std::stoll(t);
      return true;
    };
    const size_t dash = o.steps.find('-');
    int64_t a = 0, b = 0;
    const bool ok = dash == std::string::npos
                        ? number(o.steps, &a) && number(o.steps, &b)
                        : number(o.steps.substr(0, dash), &a) && number(o.steps.substr(dash + 1), &b) && b >= a;
    if (!ok) return fail("--steps: expected N or FIRST-LAST (e.g. 2-4), got '" + o.steps + "'");
    steps = StepRange{a, b};
  }
  if (o.max_file_mb <= 0) return fail("--max-file-mb: expected a positive size, got " + std::to_string(o.max_file_mb));
  auto reader = TraceReader::open(o.file);
  if (!reader.isOk()) return fail(reader.status().message());
  DamageWarning damage(**reader);
  auto run = pickRun(**reader, o.run);
  if (!run.isOk()) return fail(run.status().message());
  if (!o.chrome.empty()) {
    ChromeTraceOptions c;
    c.run_id = run->id;
    c.max_file_bytes = static_cast<uint64_t>(o.max_file_mb) << 20;
    auto s = exportChromeTrace(**reader, o.chrome, c);
    if (!s.isOk()) return fail(s.status().message());
    std::printf("chrome trace of run %lld: %lld op slices, %lld steps, %lld %s device slices, %lld counters\n",
                static_cast<long long>(run->id), static_cast<long long>(s->op_events),
                static_cast<long long>(s->step_events), static_cast<long long>(s->device_events),
                run->imported() ? "real" : "predicted", static_cast<long long>(s->counter_events));
    if (s->predicted_host_events > 0) {
      std::printf("  with the predicted timeline of a real npu: %lld host slices (thread \"host (predicted, a real npu)\")\n",
                  static_cast<long long>(s->predicted_host_events));
    }
    for (const std::string& f : s->files) std::printf("  %s\n", f.c_str());
    if (s->clamped_slices > 0) {
      std::printf("  %lld slices shortened to nest in their parent\n", static_cast<long long>(s->clamped_slices));
    }
    std::printf("open in https://ui.perfetto.dev or chrome://tracing\n");
  }
  if (!o.ascend_pt.empty()) {
    AscendPtOptions a;
    a.run_id = run->id;
    a.steps = steps;
    auto s = exportAscendPt(**reader, o.ascend_pt, a);
    if (!s.isOk()) return fail(s.status().message());
    std::printf("ascend_pt folder of run %lld: %lld steps, %lld host ops, %lld predicted kernels, %lld memory records%s\n",
                static_cast<long long>(run->id), static_cast<long long>(s->steps), static_cast<long long>(s->host_ops),
                static_cast<long long>(s->kernels), static_cast<long long>(s->memory_records),
                s->collectives ? (", " + std::to_string(s->collectives) + " collectives").c_str() : "");
    std::printf("  %s\n", s->folder.c_str());
    std::printf("open in MindStudio Insight, or: npuscope import %s\n", s->folder.c_str());
  }
  if (!o.csv.empty()) {
    OpAggregateQuery q;
    q.run_id = run->id;
    auto table = (*reader)->opAggregates(q);
    if (!table.isOk()) return fail(table.status().message());
    std::ofstream out(o.csv);
    if (!out) return fail(o.csv + ": cannot write the CSV file");
    writeOpTableCsv(*table, q.group_by, out);
    out.close();
    if (!out) return fail(o.csv + ": writing failed");
    std::printf("op table of run %lld (%zu ops): %s\n", static_cast<long long>(run->id), table->rows.size(), o.csv.c_str());
  }
  return 0;
}

}  // namespace

void addExportCommand(Commands& cli) {
  auto o = std::make_shared<ExportOptions>();
  ExportOptions& exp = *o;
  auto* exporter = cli.app().add_subcommand("export", "Export a run as a chrome trace (Perfetto) or its op table as CSV");
  exporter->add_option("file", exp.file, "Trace file")->required();
  exporter->add_option("--run", exp.run, "Run id (default: the latest run)");
  exporter->add_option("--chrome", exp.chrome, "Write the chrome trace JSON here (split into OUT.1.json, ... when large)");
  exporter->add_option("--csv", exp.csv, "Write the op table as CSV here");
  exporter->add_option("--max-file-mb", exp.max_file_mb, "Largest chrome trace file before splitting")->capture_default_str();
  exporter->add_option("--ascend-pt", exp.ascend_pt,
                       "Write torch_npu's profiler folder: DIR itself when it ends in _ascend_pt, else "
                       "DIR/{worker}_{timestamp}_ascend_pt (device rows: the predicted kernels)");
  exporter->add_option("--steps", exp.steps, "With --ascend-pt: only step N or steps FIRST-LAST");
  cli.onParsed(exporter, [o] { return runExport(*o); });
}

}  // namespace npuscope::cli
