// `npuscope compare A B`: two runs' dumps op by op (msprobe's metrics, the first divergent op);
// `compare --perf A B`: two runs' op, device-task and step times (any two runs, recorded or
// imported).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "npuscope/analysis/compare.h"
#include "npuscope/analysis/layer_mapping.h"
#include "npuscope/analysis/perf_compare.h"
#include "npuscope/import/acl_dump.h"
#include "npuscope/import/import.h"
#include "npuscope/import/msprobe.h"
#include "npuscope/store/damage_warning.h"
#include "npuscope/store/format.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {
namespace {

struct CompareArgs {
  std::string a, b, csv;
  int64_t run_a = -1, run_b = -1, step = -1, rank = -1;
  bool all = false;
  bool perf = false;
  int64_t top = 20;
  std::optional<std::string> layer_mapping;  // msprobe's -lm: a layer_mapping.yaml, "" for structure alone
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

// A side of the compare given as an msprobe dump folder or an Ascend ACL dump folder: imported into a trace file of its own
// for the compare's length, removed after.
class ImportedSide {
 public:
  ~ImportedSide() {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      if (!db_.empty()) std::remove((db_ + suffix).c_str());
    }
  }
  // The trace file to read for PATH: PATH itself, or the file an msprobe folder was imported into.
  StatusOr<std::string> fileFor(const std::string& path) {
    if (import::msprobeFolders(path).empty() && import::aclDumpFiles(path).empty()) return path;
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/npuscope-compare-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) return ioError(pattern + ": cannot create a temporary trace file for " + path);
    ::close(fd);
    db_ = name.data();
    std::remove(db_.c_str());  // the writer creates it
    auto summary = import::importPath(path, db_);
    if (!summary.isOk()) return summary.status();
    imported_ = true;
    return db_;
  }
  bool imported() const { return imported_; }

 private:
  std::string db_;
  bool imported_ = false;
};

// The run to compare: --run-x, else the run of --rank, else the latest (an imported msprobe
// folder: its first rank).
StatusOr<int64_t> runOf(TraceReader& r, int64_t run, int64_t rank, bool imported) {
  if (run >= 0) return pickRunId(r, run);
  ASSIGN_OR_RETURN(std::vector<RunRow> runs, r.runs());
  if (rank >= 0) {
    for (const RunRow& row : runs)
      if (row.rank == rank) return row.id;
    return notFound("no run of rank " + std::to_string(rank));
  }
  if (imported && !runs.empty()) {
    int64_t first = runs.front().id;
    for (const RunRow& row : runs) first = std::min(first, row.id);
    return first;
  }
  return pickRunId(r, -1);
}

// Where run A's first divergent call ran: its modules from the outermost, and its call stack.
void printWhere(TraceReader& r, int64_t run, const std::string& entry, int64_t step) {
  auto entries = r.dumpEntries(run);
  if (!entries.isOk() || entries->empty()) return;
  std::map<std::string, std::string> parent;
  const DumpEntryRow* found = nullptr;
  for (const DumpEntryRow& e : *entries) {
    if (e.step != step && step >= 0 && e.step >= 0) continue;
    parent.emplace(e.name, e.parent);
    if (!found && e.name == entry) found = &e;
  }
  if (!found) return;
  if (found->op_id >= 0) {
    // Dumped inside a recording: the op the call became, to find on the timeline.
    auto op = r.opById(found->op_id);
    if (op.isOk()) {
      std::printf("  recorded as: op %lld %.*s (step %lld, %.3f ms long)\n", static_cast<long long>(op->id),
                  static_cast<int>(op->name.size()), op->name.data(), static_cast<long long>(op->step),
                  static_cast<double>(op->dur_ns) / 1e6);
    }
  }
  std::vector<std::string> chain;
  for (std::string p = found->parent; !p.empty() && chain.size() < 64; p = parent.count(p) ? parent[p] : "") chain.push_back(p);
  if (!chain.empty()) {
    std::printf("  in module:");
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) std::printf("%s %s", it == chain.rbegin() ? "" : "\n            >", it->c_str());
    std::printf("\n");
  }
  if (!found->stack.empty()) {
    std::printf("  called from:\n");
    size_t at = 0;
    int shown = 0;
    while (at < found->stack.size() && shown < 12) {
      size_t nl = found->stack.find('\n', at);
      if (nl == std::string::npos) nl = found->stack.size();
      std::string line = found->stack.substr(at, nl - at);
      while (!line.empty() && (line.back() == ',' || line.back() == ' ')) line.pop_back();
      size_t lead = line.find_first_not_of(' ');
      if (lead != std::string::npos) std::printf("    %s\n", line.c_str() + lead), ++shown;
      at = nl + 1;
    }
  }
}

Status runCompare(const CompareArgs& args) {
  ImportedSide side_a, side_b;
  ASSIGN_OR_RETURN(const std::string file_a, side_a.fileFor(args.a));
  ASSIGN_OR_RETURN(auto ra, TraceReader::open(file_a));
  const DamageWarning damage_a(*ra);
  std::unique_ptr<TraceReader> rb_owned;
  std::optional<DamageWarning> damage_b;
  TraceReader* rb = ra.get();
  if (args.b != args.a) {
    ASSIGN_OR_RETURN(const std::string file_b, side_b.fileFor(args.b));
    ASSIGN_OR_RETURN(rb_owned, TraceReader::open(file_b));
    rb = rb_owned.get();
    damage_b.emplace(*rb);
  }
  ASSIGN_OR_RETURN(int64_t run_a, runOf(*ra, args.run_a, args.rank, side_a.imported()));
  int64_t run_b = args.run_b;
  if (run_b < 0 && args.b == args.a && args.rank < 0 && !side_a.imported()) {
    // The same file twice: the latest run against the one before it.
    ASSIGN_OR_RETURN(std::vector<RunRow> runs, ra->runs());
    if (runs.size() < 2) return invalidArgument(args.a + ": compare of one file needs two runs (or --run-a/--run-b)");
    run_a = args.run_a >= 0 ? args.run_a : runs[0].id;
    run_b = runs[1].id == run_a ? runs[0].id : runs[1].id;
  } else {
    // A dump folder against itself (msprobe's sanity check): the same run on both sides.
    ASSIGN_OR_RETURN(run_b, runOf(*rb, args.run_b, args.rank, args.b == args.a ? side_a.imported() : side_b.imported()));
  }
  if (args.perf) return runPerfCompare(args, *ra, run_a, *rb, run_b);
  compare::CompareOptions o;
  if (args.step >= 0) o.step = args.step;
  compare::LayerMapping mapping;
  if (args.layer_mapping) {
    std::string text;
    if (!args.layer_mapping->empty()) {
      std::ifstream in(*args.layer_mapping, std::ios::binary);
      if (!in) return notFound(*args.layer_mapping + ": cannot read the layer mapping (expected msprobe's layer_mapping.yaml)");
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    ASSIGN_OR_RETURN(mapping, compare::parseLayerMapping(text, *args.layer_mapping));
    o.layer_mapping = &mapping;
  }
  ASSIGN_OR_RETURN(compare::CompareResult res, compare::compareRuns(*ra, run_a, *rb, run_b, o));
  if (res.first_divergent_op.empty()) {
    std::printf("first divergent op: none (every compared tensor passes)\n");
  } else {
    std::printf("first divergent op: %s (step %lld, %s)\n", res.first_divergent_op.c_str(),
                static_cast<long long>(res.first_divergent_step), res.first_error_op.empty() ? "warning" : "error");
    printWhere(*ra, run_a, res.first_divergent_op, res.first_divergent_step);
  }
  if (res.statistics_only) std::printf("statistics only (msprobe's summary mode): max, min, mean and l2norm compared\n");
  std::printf("run %lld of %s vs run %lld of %s: %zu tensors, %zu pass, %zu warning, %zu error, %zu not compared\n",
              static_cast<long long>(run_a), args.a.c_str(), static_cast<long long>(run_b), args.b.c_str(),
              res.rows.size(), res.pass, res.warning, res.error, res.not_compared);
  if (res.statistics_only) {
    std::printf("%5s  %-44s %-8s %12s %12s %12s %12s  %s\n", "step", "tensor", "result", "max diff", "min diff",
                "mean diff", "l2norm diff", "message");
  } else {
    std::printf("%5s  %-44s %-8s %12s %12s %12s %12s  %s\n", "step", "tensor", "result", "cosine", "max_abs", "max_rel",
                "1e-3 ratio", "message");
  }
  for (const auto& r : res.rows) {
    if (!args.all && r.verdict == compare::Verdict::kPass) continue;
    auto m = [&](double v) { return r.has_metrics ? formatStat(std::isnan(v) ? std::nullopt : std::optional(v)) : "N/A"; };
    auto d = [&](double v) { return r.has_summary ? formatStat(std::isnan(v) ? std::nullopt : std::optional(v)) : "N/A"; };
    const bool stats = res.statistics_only;
    std::printf("%5lld  %-44s %-8s %12s %12s %12s %12s  %s\n", static_cast<long long>(r.step), r.tensorName().c_str(),
                compare::verdictName(r.verdict), stats ? d(r.summary.max_diff).c_str() : m(r.metrics.cosine).c_str(),
                stats ? d(r.summary.min_diff).c_str() : m(r.metrics.max_abs_err).c_str(),
                stats ? d(r.summary.mean_diff).c_str() : m(r.metrics.max_relative_err).c_str(),
                stats ? d(r.summary.norm_diff).c_str() : m(r.metrics.one_thousandth_ratio).c_str(),
                r.bench_op_name.empty() ? r.message.c_str()
                                        : ("bench: " + r.benchTensorName() + (r.message.empty() ? "" : "; " + r.message)).c_str());
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

void addCompareCommand(Commands& cli) {
  auto cmp_args = std::make_shared<CompareArgs>();
  auto* cmp = cli.app().add_subcommand("compare", "Compare two runs' dumps op by op (msprobe metrics, first divergent op)");
  cmp->add_option("A", cmp_args->a, "Trace file of the run under test (e.g. O2), or an msprobe dump folder")->required();
  cmp->add_option("B", cmp_args->b, "Trace file of the bench run (e.g. O0; may be A itself), or an msprobe dump folder")
      ->required();
  cmp->add_option("--run-a", cmp_args->run_a, "Run id in A (default: the latest)");
  cmp->add_option("--run-b", cmp_args->run_b, "Run id in B (default: the latest; the one before when B is A)");
  cmp->add_option("--step", cmp_args->step, "Only this step");
  cmp->add_option("--rank", cmp_args->rank, "Compare the runs of this rank (a job, or msprobe rank folders)");
  cmp->add_option("--csv", cmp_args->csv, "Write every row as msprobe's CSV to this file");
  cmp->add_option("--layer-mapping", cmp_args->layer_mapping,
                  "msprobe's -lm: pair renamed modules by a layer_mapping.yaml (no file: by module structure and call "
                  "order alone)")
      ->expected(0, 1);
  cmp->add_flag("--all", cmp_args->all, "Print passing rows too");
  cmp->add_flag("--perf", cmp_args->perf,
                "Compare performance instead of dumps: op and device-task times per name, and step times "
                "(any two runs: recorded, imported torch_npu or Kineto)");
  cmp->add_option("--top", cmp_args->top, "With --perf: rows per table (0: all)")->capture_default_str();
  cli.onParsed(cmp, [cmp_args] {
    const Status s = runCompare(*cmp_args);
    return s.isOk() ? 0 : fail(s);
  });
}

}  // namespace npuscope::cli
