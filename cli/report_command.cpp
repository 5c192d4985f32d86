// `npuscope report`: a run's op table, steps and loss scale, overflows, memory, the predicted
// timeline of a real npu (text, CSV or JSON); `report --cluster`: the ranks of one job.
#include "cli/report.h"

#include <memory>
#include "npuscope/store/damage_warning.h"
#include "npuscope/analysis/overflow_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "npuscope/analysis/cluster.h"
#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/store/format.h"
#include "npuscope/analysis/op_table_csv.h"
#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/analysis/step_summary.h"
#include "npuscope/store/trace_reader.h"
#include "cli/commands.h"

namespace npuscope::cli {
namespace {

std::string wallTime(int64_t unix_ns) {
  const std::time_t t = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}



void printRunHeader(const RunRow& run) {
  const double secs = run.ended_ns ? static_cast<double>(*run.ended_ns - run.started_ns) / 1e9 : 0;
  std::printf("run %lld  %s  %s", static_cast<long long>(run.id), run.command.c_str(), run.model.c_str());
  if (!run.opt_level.empty()) std::printf("  %s", run.opt_level.c_str());
  if (!run.optimizer.empty()) std::printf("  %s", run.optimizer.c_str());
  if (!run.device.empty()) std::printf("  %s", run.device.c_str());
  std::printf("  %s  started %s", run.status.c_str(), wallTime(run.wall_start_ns).c_str());
  if (run.ended_ns) std::printf("  %.1f s", secs);
  std::printf("\n");
  if (run.imported()) {
    std::printf("imported from %s: %s", run.source.c_str(), run.source_path.c_str());
    if (run.rank >= 0) std::printf("  (rank %lld", static_cast<long long>(run.rank));
    if (run.rank >= 0 && run.world_size > 0) std::printf(" of %lld", static_cast<long long>(run.world_size));
    if (run.rank >= 0) std::printf(")");
    std::printf("\n");
  }
  if (!run.results_json.empty()) std::printf("results: %s\n", run.results_json.c_str());
  if (run.dropped_records > 0) {
    std::printf("warning: %lld op records were dropped while recording (the writer fell behind)\n",
                static_cast<long long>(run.dropped_records));
  }
}

void printOpTable(const OpAggregateTable& t, bool shapes) {
  const size_t name_w = 40, shape_w = 36;
  std::printf("\n%-*s", static_cast<int>(name_w), "Name");
  if (shapes) std::printf("  %-*s", static_cast<int>(shape_w), "Input Shapes");
  std::printf("  %8s  %12s  %8s  %12s  %12s  %9s  %14s\n", "Self %", "Self", "Total %", "Total", "Avg", "Calls",
              "Device (model)");
  const size_t rule = name_w + (shapes ? shape_w + 2 : 0) + 2 + 8 + 2 + 12 + 2 + 8 + 2 + 12 + 2 + 12 + 2 + 9 + 2 + 14;
  std::printf("%s\n", std::string(rule, '-').c_str());
  for (const OpAggregate& r : t.rows) {
    std::printf("%-*s", static_cast<int>(name_w), fit(r.name, name_w).c_str());
    if (shapes) std::printf("  %-*s", static_cast<int>(shape_w), fit(r.input_shapes, shape_w).c_str());
    std::printf("  %7.2f%%  %12s  %7.2f%%  %12s  %12s  %9lld  %14s\n", r.self_pct, formatDuration(r.self_ns).c_str(),
                r.total_pct, formatDuration(r.total_ns).c_str(),
                formatDuration(static_cast<int64_t>(r.avg_ns + 0.5)).c_str(), static_cast<long long>(r.calls),
                r.device_calls ? formatDuration(r.device_ns).c_str() : "-");
  }
  std::printf("%s\n", std::string(rule, '-').c_str());
  std::printf("Self CPU time total: %s   ops: %lld in %lld groups", formatDuration(t.self_sum_ns).c_str(),
              static_cast<long long>(t.op_count), static_cast<long long>(t.group_count));
  if (t.total_device_ns > 0) std::printf("   modeled device time total: %s", formatDuration(t.total_device_ns).c_str());
  std::printf("\n");
}

void printSteps(const StepSummary& s, bool real_device) {
  std::printf("\nSteps: %lld recorded\n", static_cast<long long>(s.recorded));
  if (s.recorded == 0) return;
  if (!real_device && s.predicted.kernels > 0) std::printf("  (measured: the emulator's CPU running every op)\n");
  double mean = 0;
  for (int64_t d : s.durations) mean += static_cast<double>(d);
  mean /= static_cast<double>(s.durations.size());
  std::printf("  step time      mean %s  p50 %s  p90 %s  max %s\n", formatDuration(static_cast<int64_t>(mean)).c_str(),
              formatDuration(static_cast<int64_t>(percentile(s.durations, 0.5))).c_str(),
              formatDuration(static_cast<int64_t>(percentile(s.durations, 0.9))).c_str(),
              formatDuration(*std::max_element(s.durations.begin(), s.durations.end())).c_str());
  if (real_device && s.host_ns > 0) {
    const double busy = static_cast<double>(s.device_busy_ns) / static_cast<double>(s.host_ns);
    std::printf("  device (real) busy %s of %s host step time: %.1f%% busy, %.1f%% idle%s\n",
                formatDuration(s.device_busy_ns).c_str(), formatDuration(s.host_ns).c_str(), 100 * busy, 100 * (1 - busy),
                busy < 0.5 ? " (host-bound: the device waits for the host)" : "");
  }
  if (s.predicted.kernels > 0) {
    // The emulator's step times above are its own CPU doing every op; a real NPU's step is predicted.
    const PredictedStep total = s.predicted.total();
    std::printf("  predicted on a real npu (model, task queue on): median step %s\n",
                formatDuration(s.predicted.median_step_ns).c_str());
    std::printf("    all %lld steps: %s\n", static_cast<long long>(s.predicted.steps), describePredictedStep(total).c_str());
  }
  if (s.first_loss) std::printf("  loss           %.4f -> %.4f\n", *s.first_loss, *s.last_loss);
  if (s.first_scale) {
    std::printf("  loss scale     %g -> %g (min %g, max %g), %zu changes\n", *s.first_scale, *s.last_scale,
                *s.min_scale, *s.max_scale, s.scale_changes.size());
    const size_t show = std::min<size_t>(s.scale_changes.size(), 10);
    for (size_t i = 0; i < show; ++i) {
      const auto& c = s.scale_changes[i];
      std::printf("    step %-8lld %g -> %g (%s)\n", static_cast<long long>(c.step), c.from, c.to,
                  c.to < c.from ? "backoff" : "growth");
    }
    if (s.scale_changes.size() > show) std::printf("    ... %zu more\n", s.scale_changes.size() - show);
  }
  std::printf("  overflow steps %lld, skipped steps %lld", static_cast<long long>(s.overflow_steps),
              static_cast<long long>(s.skipped_steps));
  if (s.skipped_steps > 0 && s.total_ns > 0) {
    std::printf(": %s of step time lost to skipped steps (%.1f%%)", formatDuration(s.skipped_ns).c_str(),
                100.0 * static_cast<double>(s.skipped_ns) / static_cast<double>(s.total_ns));
  }
  std::printf("\n");
}

// The real device's tasks of an imported run, by total time.
void printDeviceTasks(const std::vector<DeviceTaskAggregate>& tasks, int64_t top) {
  int64_t total = 0, calls = 0;
  for (const DeviceTaskAggregate& a : tasks) total += a.total_ns, calls += a.calls;
  const size_t show = top > 0 ? std::min<size_t>(tasks.size(), static_cast<size_t>(top)) : tasks.size();
  std::printf("\nDevice tasks by total time%s\n\n", show < tasks.size() ? (", top " + std::to_string(show) + " of " +
                                                                            std::to_string(tasks.size())).c_str() : "");
  const size_t name_w = 40;
  std::printf("%-*s  %-16s  %8s  %12s  %12s  %12s  %9s\n", static_cast<int>(name_w), "Name", "Type", "Total %", "Total",
              "Avg", "Max", "Calls");
  const std::string rule(name_w + 2 + 16 + 2 + 8 + 2 + 12 + 2 + 12 + 2 + 12 + 2 + 9, '-');
  std::printf("%s\n", rule.c_str());
  for (size_t i = 0; i < show; ++i) {
    const DeviceTaskAggregate& a = tasks[i];
    std::printf("%-*s  %-16s  %7.2f%%  %12s  %12s  %12s  %9lld\n", static_cast<int>(name_w), fit(a.name, name_w).c_str(),
                fit(a.type, 16).c_str(), total > 0 ? 100.0 * static_cast<double>(a.total_ns) / static_cast<double>(total) : 0,
                formatDuration(a.total_ns).c_str(),
                formatDuration(a.calls ? a.total_ns / a.calls : 0).c_str(), formatDuration(a.max_ns).c_str(),
                static_cast<long long>(a.calls));
  }
  std::printf("%s\n", rule.c_str());
  std::printf("Device task time total: %s   tasks: %lld in %zu groups\n", formatDuration(total).c_str(),
              static_cast<long long>(calls), tasks.size());
}

nlohmann::json opJson(const OpAggregate& r, bool shapes) {
  nlohmann::json j = {{"name", r.name},           {"calls", r.calls},           {"self_ns", r.self_ns},
                      {"total_ns", r.total_ns},   {"avg_ns", r.avg_ns},         {"min_ns", r.min_ns},
                      {"max_ns", r.max_ns},       {"self_pct", r.self_pct},     {"total_pct", r.total_pct},
                      {"device_ns", r.device_ns}, {"device_calls", r.device_calls}};
  if (shapes) j["input_shapes"] = r.input_shapes;
  return j;
}

}  // namespace

int runClusterReport(const std::vector<std::string>& paths, const std::string& job, double threshold, bool json) {
  if (!(threshold >= 0)) return fail("--slow-threshold: expected a fraction >= 0 (0.05 is 5 %), got " + std::to_string(threshold));
  auto rep = cluster::analyze(paths, job, threshold);
  if (!rep.isOk()) return fail(rep.status().message());
  std::cout << (json ? cluster::formatJson(*rep, threshold) + "\n" : cluster::formatText(*rep, threshold));
  return 0;
}

// What the text and JSON reports show, read in one snapshot of the file.
struct ReportData {
  RunRow run;
  OpAggregateTable table;
  std::vector<DeviceTaskAggregate> tasks;
  StepSummary summary;
  std::vector<OverflowEventRow> overflows;
  std::vector<MemoryPeak> peaks;
  std::vector<DeviceMemory> memory;  // by owner (schema 10), empty when not recorded
  std::vector<DeviceComponents> components;  // by CANN component (schema 11), imported runs only
  std::vector<std::string> damage;
};

// Everything but the op table (read before, for CSV too): steps with the predicted timeline of a
// recorded run, device tasks, overflow events, memory peaks.
Status readReportData(TraceReader& r, ReportData* d) {
  const int64_t id = d->run.id;
  ASSIGN_OR_RETURN(std::vector<StepRow> steps, r.steps(id));
  ASSIGN_OR_RETURN(std::vector<StepDeviceTime> device, r.stepDeviceTimes(id));
  ASSIGN_OR_RETURN(d->overflows, r.overflowEvents(id));
  ASSIGN_OR_RETURN(d->peaks, r.memoryPeaks(id));
  ASSIGN_OR_RETURN(d->memory, memoryByDevice(r, id));
  ASSIGN_OR_RETURN(std::vector<MemoryComponentRecord> components, r.memoryComponents(id));
  d->components = componentPeaks(components);
  ASSIGN_OR_RETURN(d->tasks, r.deviceTaskAggregates(id));
  d->summary = summarizeSteps(steps, device);
  if (!d->run.imported()) {
    ASSIGN_OR_RETURN(std::vector<PredictedStep> predicted, predictRun(r, id, hostModelParamsFor(d->run)));
    d->summary.predicted = summarizePrediction(predicted);
  }
  return Status::ok();
}

void printReportJson(const ReportOptions& o, const ReportData& d, TraceReader& r) {
  nlohmann::json j;
  j["file"] = o.file;
  j["run"] = {{"id", d.run.id},
              {"command", d.run.command},
              {"model", d.run.model},
              {"opt_level", d.run.opt_level},
              {"optimizer", d.run.optimizer},
              {"device", d.run.device},
              {"status", d.run.status},
              {"started_ns", d.run.started_ns},
              {"wall_start_ns", d.run.wall_start_ns},
              {"dropped_records", d.run.dropped_records}};
  if (d.run.imported()) {
    j["run"]["source"] = d.run.source;
    j["run"]["source_path"] = d.run.source_path;
    if (d.run.rank >= 0) j["run"]["rank"] = d.run.rank;
    if (d.run.world_size > 0) j["run"]["world_size"] = d.run.world_size;
  }
  j["device_tasks"] = nlohmann::json::array();
  for (const DeviceTaskAggregate& a : d.tasks) {
    j["device_tasks"].push_back({{"name", a.name}, {"type", a.type}, {"calls", a.calls}, {"total_ns", a.total_ns},
                                 {"min_ns", a.min_ns}, {"max_ns", a.max_ns}});
  }
  j["steps_device"] = d.run.imported() ? "real" : "model";
  if (d.run.ended_ns) j["run"]["ended_ns"] = *d.run.ended_ns;
  for (const char* key : {"config", "results"}) {
    const std::string& text = std::string(key) == "config" ? d.run.config_json : d.run.results_json;
    if (!text.empty()) j["run"][key] = nlohmann::json::parse(text, nullptr, false);
  }
  j["ops"] = nlohmann::json::array();
  for (const OpAggregate& a : d.table.rows) j["ops"].push_back(opJson(a, o.group_by_shape));
  j["op_count"] = d.table.op_count;
  j["self_sum_ns"] = d.table.self_sum_ns;
  j["steps"] = {{"recorded", d.summary.recorded},
                {"overflow_steps", d.summary.overflow_steps},
                {"skipped_steps", d.summary.skipped_steps},
                {"skipped_ns", d.summary.skipped_ns},
                {"step_ns", d.summary.total_ns},
                {"host_ns_with_device_time", d.summary.host_ns},
                {"device_busy_ns", d.summary.device_busy_ns}};
  if (d.summary.predicted.kernels > 0) {
    const PredictedStep total = d.summary.predicted.total();
    j["predicted"] = {{"task_queue", true},
                      {"steps", d.summary.predicted.steps},
                      {"median_step_ns", d.summary.predicted.median_step_ns},
                      {"step_ns", total.step_ns},
                      {"device_busy_ns", total.device_busy_ns},
                      {"host_wait_ns", total.host_wait_ns},
                      {"dispatch_ns", total.dispatch_ns},
                      {"kernels", total.kernels},
                      {"host_ops", total.host_ops},
                      {"syncs", total.syncs},
                      {"devices", total.devices},
                      {"device_idle_share", total.deviceIdleShare()},
                      {"host_wait_share", total.hostWaitShare()},
                      {"bound", boundByName(boundBy(total))}};
  }
  if (!d.summary.durations.empty()) {
    j["steps"]["p50_ns"] = percentile(d.summary.durations, 0.5);
    j["steps"]["p90_ns"] = percentile(d.summary.durations, 0.9);
  }
  if (d.summary.first_loss) j["steps"]["first_loss"] = *d.summary.first_loss, j["steps"]["last_loss"] = *d.summary.last_loss;
  if (d.summary.last_scale) j["steps"]["final_loss_scale"] = *d.summary.last_scale;
  j["loss_scale_changes"] = nlohmann::json::array();
  for (const auto& c : d.summary.scale_changes) {
    j["loss_scale_changes"].push_back({{"step", c.step}, {"from", c.from}, {"to", c.to}});
  }
  j["overflow_events"] = nlohmann::json::array();
  for (const OverflowEventRow& e : d.overflows) {
    j["overflow_events"].push_back(
        {{"step", e.step}, {"ts_ns", e.ts_ns}, {"source", e.source}, {"op_name", e.op_name}, {"detail", e.detail},
         {"op_id", e.op_id >= 0 ? nlohmann::json(e.op_id) : nlohmann::json()}});
  }
  j["memory_peaks"] = nlohmann::json::array();
  for (const MemoryPeak& p : d.peaks) {
    j["memory_peaks"].push_back({{"device", "npu:" + std::to_string(p.device)},
                                 {"allocated", p.allocated},
                                 {"reserved", p.reserved}});
  }
  j["memory"] = nlohmann::json::array();
  for (const DeviceMemory& m : d.memory) j["memory"].push_back(memoryJson(m, r, 10));
  j["memory_components"] = nlohmann::json::array();
  for (const DeviceComponents& c : d.components) j["memory_components"].push_back(componentsJson(c));
  j["damage"] = d.damage;  // what reading found damaged in the file (also warned on stderr)
  std::cout << j.dump(2) << "\n";
}

void printReportText(const ReportOptions& o, OpSortKey sort, const ReportData& d, TraceReader& r) {
  std::printf("%s\n", o.file.c_str());
  printRunHeader(d.run);
  if (d.table.op_count == 0) {
    std::printf("\nno ops recorded in this run\n");
  } else {
    std::printf("\nOperators by %s time%s", opSortKeyName(sort),
                o.group_by_shape ? " (grouped by name and input shapes)" : "");
    if (o.top > 0 && d.table.group_count > o.top) {
      std::printf(", top %lld of %lld", static_cast<long long>(o.top), static_cast<long long>(d.table.group_count));
    }
    std::printf("\n");
    printOpTable(d.table, o.group_by_shape);
  }
  if (!d.tasks.empty()) printDeviceTasks(d.tasks, o.top);
  printSteps(d.summary, d.run.imported());
  std::printf("\nOverflow events: %zu\n", d.overflows.size());
  const size_t show = std::min<size_t>(d.overflows.size(), 20);
  for (size_t i = 0; i < show; ++i) {
    const OverflowEventRow& e = d.overflows[i];
    if (e.source == "first_op") {
      std::printf("  step %-8lld %-16s %s\n", static_cast<long long>(e.step), e.source.c_str(), describeOverflowEvent(e).c_str());
      continue;
    }
    std::printf("  step %-8lld %-16s %s%s%s\n", static_cast<long long>(e.step), e.source.c_str(), e.op_name.c_str(),
                e.detail.empty() ? "" : "  ", e.detail.c_str());
  }
  if (d.overflows.size() > show) std::printf("  ... %zu more\n", d.overflows.size() - show);
  std::printf("\nPeak memory:%s\n", d.peaks.empty() ? " not recorded" : "");
  for (const MemoryPeak& p : d.peaks) {
    std::printf("  npu:%d  allocated %s  reserved %s\n", p.device, formatBytes(static_cast<uint64_t>(p.allocated)).c_str(),
                formatBytes(static_cast<uint64_t>(p.reserved)).c_str());
  }
  if (!d.memory.empty()) std::printf("\nMemory by owner (npuscope memory FILE lists any moment):\n");
  for (const DeviceMemory& m : d.memory) printMemoryBreakdown(m, r, 5);
  if (!d.components.empty()) std::printf("\nDevice memory by component (npu_module_mem):\n");
  for (const DeviceComponents& c : d.components) printComponentPeaks(c, "  ");
}

int runReport(const ReportOptions& o) {
  if (o.format != "text" && o.format != "csv" && o.format != "json") {
    return fail("--format: unknown format '" + o.format + "' (expected text, csv or json)");
  }
  if (o.top < 0) return fail("--top: expected 0 (every op) or a positive count, got " + std::to_string(o.top));
  auto sort = parseOpSortKey(o.sort);
  if (!sort.isOk()) return fail("--sort: " + sort.status().message());
  auto reader = TraceReader::open(o.file);
  if (!reader.isOk()) return fail(reader.status().message());
  TraceReader& r = **reader;
  DamageWarning damage(r);
  Status snap = r.beginSnapshot();
  if (!snap.isOk()) return fail(snap.message());
  auto run = pickRun(r, o.run);
  if (!run.isOk()) return fail(run.status().message());

  OpAggregateQuery q;
  q.run_id = run->id;
  q.group_by = o.group_by_shape ? OpGroupBy::kNameAndShapes : OpGroupBy::kName;
  q.sort = *sort;
  q.descending = *sort != OpSortKey::kName;
  q.top_n = static_cast<size_t>(o.top);
  auto table = r.opAggregates(q);
  if (!table.isOk()) return fail(table.status().message());
  if (o.format == "csv") {
    writeOpTableCsv(*table, q.group_by, std::cout);
    return 0;
  }
  ReportData d;
  d.run = std::move(*run);
  d.table = std::move(*table);
  const Status read = readReportData(r, &d);
  if (!read.isOk()) return fail(read.message());
  (void)r.endSnapshot();
  if (o.format == "json") {
    d.damage = r.damage();
    printReportJson(o, d, r);
  } else {
    printReportText(o, *sort, d, r);
  }
  return 0;
}

namespace {

struct ReportArgs {
  ReportOptions rep;
  std::vector<std::string> files;
  bool cluster = false;
  std::string job;
  double threshold = 0.05;
  bool csv = false, json = false;
};

int runReportCommand(const ReportArgs& a) {
  if (a.csv && a.json) return fail("report: --csv and --json exclude each other");
  ReportOptions rep = a.rep;
  rep.format = a.csv ? "csv" : a.json ? "json" : "text";
  if (a.cluster) {
    if (a.csv) return fail("report --cluster: --csv is not available (text or --json)");
    return runClusterReport(a.files, a.job, a.threshold, a.json);
  }
  if (!a.job.empty()) return fail("report: --job needs --cluster");
  if (a.files.size() != 1) {
    return fail("report: one trace file expected, got " + std::to_string(a.files.size()) +
                " (several only with --cluster)");
  }
  rep.file = a.files.front();
  return runReport(rep);
}

}  // namespace

void addReportCommand(Commands& cli) {
  auto a = std::make_shared<ReportArgs>();
  ReportOptions& rep = a->rep;
  auto* report = cli.app().add_subcommand("report", "Print a run's op table, step and loss-scale summary, overflows, memory");
  report->add_option("file", a->files, "Trace file (with --cluster: the ranks' trace files or folders of them)")
      ->required();
  report->add_option("--run", rep.run, "Run id (default: the latest run)");
  report->add_flag("--cluster", a->cluster,
                   "The ranks of a multi-rank job as one cluster: step time breakdown per rank, slow rank, collectives");
  report->add_option("--job", a->job, "With --cluster: the job to report (default: the newest in the files)");
  report->add_option("--slow-threshold", a->threshold,
                     "With --cluster: name a slow rank when (max - min) / mean of the ranks' own time exceeds this")
      ->capture_default_str();
  report->add_option("--sort", rep.sort, "Sort ops by self, total, count, avg, name or device")->capture_default_str();
  report->add_option("--top", rep.top, "Show this many ops (0: all)")->capture_default_str();
  report->add_flag("--group-by-shape", rep.group_by_shape, "One row per op name and input shapes");
  report->add_flag("--csv", a->csv, "The op table as CSV on stdout");
  report->add_flag("--json", a->json, "The whole report as JSON on stdout");
  cli.onParsed(report, [a] { return runReportCommand(*a); });
}

}  // namespace npuscope::cli
