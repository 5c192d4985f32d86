#include "dump_commands.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "npuscope/core/compare.h"
#include "npuscope/core/damage_warning.h"
#include "npuscope/core/format.h"
#include "npuscope/core/perf_compare.h"
#include "npuscope/core/trace_reader.h"
#include "npuscope/dumper/dump_export.h"
#include "npuscope/dumper/dumper.h"

namespace npuscope::dumper {
namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "npuscope: error: %s\n", s.message().c_str());
  return 1;
}

std::string num(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", *v);
  return buf;
}

StatusOr<int64_t> resolveRun(TraceReader& r, int64_t run) {
  if (run >= 0) {
    ASSIGN_OR_RETURN(RunRow row, r.run(run));
    return row.id;
  }
  ASSIGN_OR_RETURN(RunRow latest, r.latestRun());
  return latest.id;
}

struct ListArgs {
  std::string file;
  int64_t run = -1;
  int64_t step = -1;
  std::string op;
};

Status runList(const ListArgs& a) {
  ASSIGN_OR_RETURN(auto reader, TraceReader::open(a.file));
  ASSIGN_OR_RETURN(int64_t run, resolveRun(*reader, a.run));
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader->tensorDumps(run));
  std::printf("%6s %5s  %-36s %-6s %3s %-9s %-18s %12s %12s %12s %12s %5s %5s %10s\n", "id", "step", "op", "io", "idx",
              "dtype", "shape", "min", "max", "mean", "l2norm", "nan", "inf", "bytes");
  size_t shown = 0;
  for (const auto& d : dumps) {
    if (a.step >= 0 && d.step != a.step) continue;
    if (!a.op.empty() && d.op_name.find(a.op) == std::string::npos && d.op_type.find(a.op) == std::string::npos) continue;
    std::printf("%6lld %5lld  %-36s %-6s %3lld %-9s %-18s %12s %12s %12s %12s %5s %5s %10lld\n",
                static_cast<long long>(d.id), static_cast<long long>(d.step), d.op_name.c_str(), d.io.c_str(),
                static_cast<long long>(d.idx), d.dtype.c_str(), d.shape.c_str(), num(d.min).c_str(), num(d.max).c_str(),
                num(d.mean).c_str(), num(d.l2norm).c_str(),
                d.nan_count ? std::to_string(*d.nan_count).c_str() : "-",
                d.inf_count ? std::to_string(*d.inf_count).c_str() : "-", static_cast<long long>(d.data_bytes));
    ++shown;
  }
  std::printf("%zu tensors of run %lld\n", shown, static_cast<long long>(run));
  return Status::ok();
}

struct ShowArgs {
  std::string file;
  std::string tensor;  // a dump id, or `{op_name}.{io}.{idx}`
  int64_t run = -1;
  int64_t step = -1;
  int bins = 20;
};

Status runShow(const ShowArgs& a) {
  ASSIGN_OR_RETURN(auto reader, TraceReader::open(a.file));
  ASSIGN_OR_RETURN(int64_t run, resolveRun(*reader, a.run));
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader->tensorDumps(run));
  const TensorDumpInfo* found = nullptr;
  for (const auto& d : dumps) {
    const std::string name = d.op_name + "." + d.io + "." + std::to_string(d.idx);
    if ((a.tensor == std::to_string(d.id) || a.tensor == name) && (a.step < 0 || d.step == a.step)) {
      found = &d;
      break;
    }
  }
  if (!found) return notFound(a.file + ": run " + std::to_string(run) + " has no tensor dump '" + a.tensor + "'");
  const auto& d = *found;
  std::printf("tensor   %s.%s.%lld (dump %lld, step %lld)\n", d.op_name.c_str(), d.io.c_str(),
              static_cast<long long>(d.idx), static_cast<long long>(d.id), static_cast<long long>(d.step));
  std::printf("op type  %s\ndtype    %s\nshape    %s\nformat   %s\n", d.op_type.c_str(), d.dtype.c_str(), d.shape.c_str(),
              d.format.c_str());
  std::printf("min %s  max %s  mean %s  l2norm %s  nan %s  inf %s\n", num(d.min).c_str(), num(d.max).c_str(),
              num(d.mean).c_str(), num(d.l2norm).c_str(), d.nan_count ? std::to_string(*d.nan_count).c_str() : "-",
              d.inf_count ? std::to_string(*d.inf_count).c_str() : "-");
  if (d.data_ref >= 0) {
    std::printf("stored   with dump %lld (the same bytes, kept once per step)\n", static_cast<long long>(d.data_ref));
  }
  if (d.data_bytes == 0) {
    std::printf("(statistics only: no data to draw a histogram)\n");
    return Status::ok();
  }
  ASSIGN_OR_RETURN(TensorDumpData stored, reader->tensorDumpData(d.id));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, compare::decodeDumpPayload(stored.bytes, stored.zstd_frame));
  const compare::DType t = compare::parseDType(d.dtype);
  if (compare::dtypeSize(t) == 0) return invalidArgument("unknown dtype " + d.dtype);
  const std::vector<double> v = compare::toDoubles(raw.data(), t, raw.size() / compare::dtypeSize(t));
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!(lo <= hi)) {
    std::printf("(no finite values)\n");
    return Status::ok();
  }
  const int bins = std::max(1, a.bins);
  std::vector<int64_t> count(bins, 0);
  const double width = hi > lo ? (hi - lo) / bins : 1;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    int b = static_cast<int>((x - lo) / width);
    count[std::min(std::max(b, 0), bins - 1)]++;
  }
  const int64_t peak = *std::max_element(count.begin(), count.end());
  std::printf("histogram of %zu finite values\n", v.size());
  for (int b = 0; b < bins; ++b) {
    const int bar = peak ? static_cast<int>(50 * count[b] / peak) : 0;
    std::printf("[%12.5g, %12.5g) %8lld %s\n", lo + b * width, lo + (b + 1) * width, static_cast<long long>(count[b]),
                std::string(bar, '#').c_str());
  }
  return Status::ok();
}

struct ExportArgs {
  std::string file, out, format = "ascend";
  int64_t run = -1, step = -1;
};

Status runExport(const ExportArgs& a) {
  ASSIGN_OR_RETURN(auto reader, TraceReader::open(a.file));
  ExportOptions o;
  ASSIGN_OR_RETURN(o.format, parseExportFormat(a.format));
  ASSIGN_OR_RETURN(o.run_id, resolveRun(*reader, a.run));
  o.out_dir = a.out;
  if (a.step >= 0) o.step = a.step;
  ASSIGN_OR_RETURN(size_t files, exportDumps(*reader, o));
  std::printf("wrote %zu %s files to %s\n", files, a.format.c_str(), a.out.c_str());
  return Status::ok();
}

struct CompareArgs {
  std::string a, b, csv;
  int64_t run_a = -1, run_b = -1, step = -1;
  bool all = false;
  bool perf = false;
  int64_t top = 20;
};

// The performance compare's tables: one row per name, the largest differences first.
void printPerfRows(const char* title, const std::vector<PerfRow>& rows, int64_t top) {
  const size_t show = top > 0 ? std::min<size_t>(rows.size(), static_cast<size_t>(top)) : rows.size();
  std::printf("\n%s, %zu names%s\n\n", title, rows.size(),
              show < rows.size() ? (", the " + std::to_string(show) + " largest differences").c_str() : "");
  std::printf("%-40s  %7s %11s %11s  %7s %11s %11s  %12s  %7s\n", "Name", "Calls A", "Total A", "Avg A", "Calls B",
              "Total B", "Avg B", "B - A", "B / A");
  const std::string rule(40 + 2 + 7 + 1 + 11 + 1 + 11 + 2 + 7 + 1 + 11 + 1 + 11 + 2 + 12 + 2 + 7, '-');
  std::printf("%s\n", rule.c_str());
  auto dur = [](int64_t ns, bool present) { return present ? formatDuration(ns) : std::string("-"); };
  for (size_t i = 0; i < show; ++i) {
    const PerfRow& r = rows[i];
    std::string name = r.name.size() > 40 ? r.name.substr(0, 37) + "..." : r.name;
    const int64_t d = r.diffNs();
    const std::string diff = (d < 0 ? "-" : "+") + formatDuration(d < 0 ? -d : d);
    char ratio[32];
    if (r.onlyA()) {
      std::snprintf(ratio, sizeof ratio, "A only");
    } else if (r.onlyB()) {
      std::snprintf(ratio, sizeof ratio, "B only");
    } else {
      std::snprintf(ratio, sizeof ratio, "%.2f", r.ratio());
    }
    std::printf("%-40s  %7lld %11s %11s  %7lld %11s %11s  %12s  %7s\n", name.c_str(), static_cast<long long>(r.a.calls),
                dur(r.a.total_ns, !r.onlyB()).c_str(), dur(static_cast<int64_t>(r.a.avgNs()), !r.onlyB()).c_str(),
                static_cast<long long>(r.b.calls), dur(r.b.total_ns, !r.onlyA()).c_str(),
                dur(static_cast<int64_t>(r.b.avgNs()), !r.onlyA()).c_str(), diff.c_str(), ratio);
  }
  size_t only_a = 0, only_b = 0;
  for (const PerfRow& r : rows) only_a += r.onlyA(), only_b += r.onlyB();
  std::printf("%s\n%zu names only in A, %zu only in B\n", rule.c_str(), only_a, only_b);
}

Status runPerfCompare(const CompareArgs& args, TraceReader& ra, int64_t run_a, TraceReader& rb, int64_t run_b) {
  ASSIGN_OR_RETURN(PerfCompareResult res, comparePerf(ra, run_a, rb, run_b));
  ASSIGN_OR_RETURN(RunRow a, ra.run(run_a));
  ASSIGN_OR_RETURN(RunRow b, rb.run(run_b));
  auto describe = [](const RunRow& r) {
    std::string s = r.imported() ? "imported " + r.source : "npuscope " + r.command;
    if (!r.model.empty()) s += " " + r.model;
    if (!r.opt_level.empty()) s += " " + r.opt_level;
    return s;
  };
  std::printf("performance compare\n  A: run %lld of %s (%s)\n  B: run %lld of %s (%s)\n", static_cast<long long>(run_a),
              args.a.c_str(), describe(a).c_str(), static_cast<long long>(run_b), args.b.c_str(), describe(b).c_str());
  auto mean = [&](bool side_b) {
    int64_t sum = 0, n = 0;
    for (const PerfStepPair& p : res.steps) {
      const int64_t d = side_b ? p.dur_b : p.dur_a;
      if (d >= 0) sum += d, ++n;
    }
    return std::make_pair(n ? sum / n : -1, n);
  };
  const auto [mean_a, n_a] = mean(false);
  const auto [mean_b, n_b] = mean(true);
  std::printf("\nSteps: A %lld recorded, B %lld recorded", static_cast<long long>(n_a), static_cast<long long>(n_b));
  if (mean_a > 0 && mean_b > 0) {
    std::printf("; mean step A %s, B %s, B / A %.2f\n", formatDuration(mean_a).c_str(), formatDuration(mean_b).c_str(),
                static_cast<double>(mean_b) / static_cast<double>(mean_a));
    const size_t show = std::min<size_t>(res.steps.size(), 10);
    std::printf("  %-6s  %-8s %11s  %-8s %11s  %7s\n", "#", "step A", "A", "step B", "B", "B / A");
    for (size_t i = 0; i < show; ++i) {
      const PerfStepPair& p = res.steps[i];
      std::printf("  %-6lld  %-8s %11s  %-8s %11s  %7s\n", static_cast<long long>(p.index),
                  p.step_a >= 0 ? std::to_string(p.step_a).c_str() : "-", p.dur_a >= 0 ? formatDuration(p.dur_a).c_str() : "-",
                  p.step_b >= 0 ? std::to_string(p.step_b).c_str() : "-", p.dur_b >= 0 ? formatDuration(p.dur_b).c_str() : "-",
                  p.dur_a > 0 && p.dur_b >= 0
                      ? std::to_string(static_cast<double>(p.dur_b) / static_cast<double>(p.dur_a)).substr(0, 4).c_str()
                      : "-");
    }
    if (res.steps.size() > show) std::printf("  ... %zu more\n", res.steps.size() - show);
  } else {
    std::printf("\n");
  }
  std::printf("\nHost op time (self, summed): A %s, B %s\n", formatDuration(res.host_total_a).c_str(),
              formatDuration(res.host_total_b).c_str());
  printPerfRows("Host ops by name (total time, children included)", res.host, args.top);
  if (!res.device.empty()) {
    std::printf("\nDevice time: A %s (%s), B %s (%s)\n", formatDuration(res.device_total_a).c_str(), res.device_a.c_str(),
                formatDuration(res.device_total_b).c_str(), res.device_b.c_str());
    printPerfRows("Device tasks by name (real tasks: instance numbers dropped; model: the op's modeled time)", res.device,
                  args.top);
  }
  if (!args.csv.empty()) {
    std::ofstream out(args.csv);
    if (!out) return ioError(args.csv + ": cannot write");
    out << "kind,name,calls_a,total_a_ns,avg_a_ns,max_a_ns,calls_b,total_b_ns,avg_b_ns,max_b_ns,diff_ns,ratio\n";
    for (const auto* rows : {&res.host, &res.device}) {
      for (const PerfRow& r : *rows) {
        std::string name = r.name;
        if (name.find_first_of(",\"\n") != std::string::npos) {
          std::string q = "\"";
          for (char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
          name = q + "\"";
        }
        out << (rows == &res.host ? "host" : "device") << ',' << name << ',' << r.a.calls << ',' << r.a.total_ns << ','
            << static_cast<int64_t>(r.a.avgNs()) << ',' << r.a.max_ns << ',' << r.b.calls << ',' << r.b.total_ns << ','
            << static_cast<int64_t>(r.b.avgNs()) << ',' << r.b.max_ns << ',' << r.diffNs() << ',';
        if (!r.onlyA() && !r.onlyB()) out << r.ratio();
        out << '\n';
      }
    }
    if (!out.flush()) return ioError(args.csv + ": write failed");
    std::printf("\nwrote every row to %s\n", args.csv.c_str());
  }
  return Status::ok();
}

Status runCompare(const CompareArgs& args) {
  ASSIGN_OR_RETURN(auto ra, TraceReader::open(args.a));
  const DamageWarning damage_a(*ra);
  std::unique_ptr<TraceReader> rb_owned;
  std::optional<DamageWarning> damage_b;
  TraceReader* rb = ra.get();
  if (args.b != args.a) {
    ASSIGN_OR_RETURN(rb_owned, TraceReader::open(args.b));
    rb = rb_owned.get();
    damage_b.emplace(*rb);
  }
  ASSIGN_OR_RETURN(int64_t run_a, resolveRun(*ra, args.run_a));
  int64_t run_b = args.run_b;
  if (run_b < 0 && args.b == args.a) {
    // The same file twice: the latest run against the one before it.
    ASSIGN_OR_RETURN(std::vector<RunRow> runs, ra->runs());
    if (runs.size() < 2) return invalidArgument(args.a + ": compare of one file needs two runs (or --run-a/--run-b)");
    run_a = args.run_a >= 0 ? args.run_a : runs[0].id;
    run_b = runs[1].id == run_a ? runs[0].id : runs[1].id;
  } else {
    ASSIGN_OR_RETURN(run_b, resolveRun(*rb, args.run_b));
  }
  if (args.perf) return runPerfCompare(args, *ra, run_a, *rb, run_b);
  compare::CompareOptions o;
  if (args.step >= 0) o.step = args.step;
  ASSIGN_OR_RETURN(compare::CompareResult res, compare::compareRuns(*ra, run_a, *rb, run_b, o));
  if (res.first_divergent_op.empty()) {
    std::printf("first divergent op: none (every compared tensor passes)\n");
  } else {
    std::printf("first divergent op: %s (step %lld, %s)\n", res.first_divergent_op.c_str(),
                static_cast<long long>(res.first_divergent_step), res.first_error_op.empty() ? "warning" : "error");
  }
  std::printf("run %lld of %s vs run %lld of %s: %zu tensors, %zu pass, %zu warning, %zu error, %zu not compared\n",
              static_cast<long long>(run_a), args.a.c_str(), static_cast<long long>(run_b), args.b.c_str(),
              res.rows.size(), res.pass, res.warning, res.error, res.not_compared);
  std::printf("%5s  %-44s %-8s %12s %12s %12s %12s  %s\n", "step", "tensor", "result", "cosine", "max_abs",
              "max_rel", "1e-3 ratio", "message");
  for (const auto& r : res.rows) {
    if (!args.all && r.verdict == compare::Verdict::kPass) continue;
    auto m = [&](double v) { return r.has_metrics ? num(std::isnan(v) ? std::nullopt : std::optional(v)) : "N/A"; };
    std::printf("%5lld  %-44s %-8s %12s %12s %12s %12s  %s\n", static_cast<long long>(r.step),
                r.tensorName().c_str(), compare::verdictName(r.verdict), m(r.metrics.cosine).c_str(),
                m(r.metrics.max_abs_err).c_str(), m(r.metrics.max_relative_err).c_str(),
                m(r.metrics.one_thousandth_ratio).c_str(), r.message.c_str());
  }
  if (!args.csv.empty()) {
    std::ofstream out(args.csv);
    out << compare::toCsv(res);
    if (!out.flush()) return ioError(args.csv + ": cannot write the CSV");
    std::printf("csv: %s\n", args.csv.c_str());
  }
  return Status::ok();
}

}  // namespace

void addDumpCommands(CLI::App& app, int& exit_code) {
  auto* dump = app.add_subcommand("dump", "Tensor dumps of a trace file: list, show, export");
  dump->require_subcommand(1);

  auto list_args = std::make_shared<ListArgs>();
  auto* list = dump->add_subcommand("list", "List the dumped tensors of a run with their statistics");
  list->add_option("FILE", list_args->file, "Trace file")->required();
  list->add_option("--run", list_args->run, "Run id (default: the latest)");
  list->add_option("--step", list_args->step, "Only this step");
  list->add_option("--op", list_args->op, "Only ops whose name or type contains this text");
  list->callback([list_args, &exit_code] {
    const Status s = runList(*list_args);
    if (!s.isOk()) exit_code = fail(s);
  });

  auto show_args = std::make_shared<ShowArgs>();
  auto* show = dump->add_subcommand("show", "Show one tensor: statistics and a text histogram");
  show->add_option("FILE", show_args->file, "Trace file")->required();
  show->add_option("TENSOR", show_args->tensor, "Dump id, or op_name.io.idx (e.g. addmm.0.forward.output.0)")->required();
  show->add_option("--run", show_args->run, "Run id (default: the latest)");
  show->add_option("--step", show_args->step, "Step of the tensor (default: the first dumped)");
  show->add_option("--bins", show_args->bins, "Histogram bins")->capture_default_str();
  show->callback([show_args, &exit_code] {
    const Status s = runShow(*show_args);
    if (!s.isOk()) exit_code = fail(s);
  });

  auto export_args = std::make_shared<ExportArgs>();
  auto* exp = dump->add_subcommand("export", "Export a run's dumps as Ascend dump files or .npy");
  exp->add_option("FILE", export_args->file, "Trace file")->required();
  exp->add_option("--out", export_args->out, "Output directory")->required();
  exp->add_option("--format", export_args->format, "ascend or npy")->capture_default_str();
  exp->add_option("--run", export_args->run, "Run id (default: the latest)");
  exp->add_option("--step", export_args->step, "Only this step");
  exp->callback([export_args, &exit_code] {
    const Status s = runExport(*export_args);
    if (!s.isOk()) exit_code = fail(s);
  });

  auto cmp_args = std::make_shared<CompareArgs>();
  auto* cmp = app.add_subcommand("compare", "Compare two runs' dumps op by op (msprobe metrics, first divergent op)");
  cmp->add_option("A", cmp_args->a, "Trace file of the run under test (e.g. O2)")->required();
  cmp->add_option("B", cmp_args->b, "Trace file of the bench run (e.g. O0); may be A itself")->required();
  cmp->add_option("--run-a", cmp_args->run_a, "Run id in A (default: the latest)");
  cmp->add_option("--run-b", cmp_args->run_b, "Run id in B (default: the latest; the one before when B is A)");
  cmp->add_option("--step", cmp_args->step, "Only this step");
  cmp->add_option("--csv", cmp_args->csv, "Write every row as msprobe's CSV to this file");
  cmp->add_flag("--all", cmp_args->all, "Print passing rows too");
  cmp->add_flag("--perf", cmp_args->perf,
                "Compare performance instead of dumps: op and device-task times per name, and step times "
                "(any two runs: recorded, imported torch_npu or Kineto)");
  cmp->add_option("--top", cmp_args->top, "With --perf: rows per table (0: all)")->capture_default_str();
  cmp->callback([cmp_args, &exit_code] {
    const Status s = runCompare(*cmp_args);
    if (!s.isOk()) exit_code = fail(s);
  });
}

void addTrainDumpOptions(CLI::App& train, DumpCliOptions& options) {
  train.add_option("--dump-config", options.dump_config, "Dump ops as configured in this acl.json (as ACL_DUMP_DATA=1)");
  train.add_option("--overflow-check", options.overflow_check,
                   "Overflow check mode: dump the first N overflowing ops with their inputs and outputs");
  train.add_flag("--dump-force", options.force,
                 "Dump even when the free space cannot hold the requested steps (as \"force\": true)");
}

StatusOr<bool> configureDumperFromCli(const DumpCliOptions& options) {
  Dumper& d = Dumper::instance();
  if (!options.dump_config.empty() || options.overflow_check > 0) {
    DumpConfig c;
    if (!options.dump_config.empty()) {
      ASSIGN_OR_RETURN(c, DumpConfig::fromFile(options.dump_config));
    }
    if (options.overflow_check > 0) {
      c.data = DumpDataKind::kOverflow;
      c.overflow_limit = options.overflow_check;
    }
    c.force = c.force || options.force;
    RETURN_IF_ERROR(d.configure(c));
    return true;
  }
  ASSIGN_OR_RETURN(bool requested, d.configureFromEnvironment());
  if (requested && options.force && !d.config().force) {
    DumpConfig c = d.config();
    c.force = true;
    RETURN_IF_ERROR(d.configure(c));
  }
  return requested;
}

}  // namespace npuscope::dumper
