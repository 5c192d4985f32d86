// `npuscope dump list|show|export`: the tensor dumps of a trace file (ACL_DUMP_DATA=1 runs).
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "npuscope/dumper/dump_export.h"
#include "npuscope/store/format.h"
#include "npuscope/store/tensor_data.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::cli {
namespace {

struct ListArgs {
  std::string file;
  int64_t run = -1;
  int64_t step = -1;
  std::string op;
};

Status runList(const ListArgs& a) {
  ASSIGN_OR_RETURN(auto reader, TraceReader::open(a.file));
  ASSIGN_OR_RETURN(int64_t run, pickRunId(*reader, a.run));
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader->tensorDumps(run));
  std::printf("%6s %5s  %-36s %-12s %-9s %-18s %12s %12s %12s %12s %5s %5s %10s\n", "id", "step", "op", "tensor",
              "dtype", "shape", "min", "max", "mean", "l2norm", "nan", "inf", "bytes");
  size_t shown = 0;
  for (const auto& d : dumps) {
    if (a.step >= 0 && d.step != a.step) continue;
    if (!a.op.empty() && d.op_name.find(a.op) == std::string::npos && d.op_type.find(a.op) == std::string::npos) continue;
    std::printf("%6lld %5lld  %-36s %-12s %-9s %-18s %12s %12s %12s %12s %5s %5s %10lld\n",
                static_cast<long long>(d.id), static_cast<long long>(d.step), d.op_name.c_str(), d.argName().c_str(),
                d.dtype.c_str(), d.shape.c_str(), formatStat(d.min).c_str(), formatStat(d.max).c_str(),
                formatStat(d.mean).c_str(), formatStat(d.l2norm).c_str(),
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
  ASSIGN_OR_RETURN(int64_t run, pickRunId(*reader, a.run));
  ASSIGN_OR_RETURN(std::vector<TensorDumpInfo> dumps, reader->tensorDumps(run));
  const TensorDumpInfo* found = nullptr;
  for (const auto& d : dumps) {
    const std::string name = d.op_name + "." + d.argName();
    if ((a.tensor == std::to_string(d.id) || a.tensor == name) && (a.step < 0 || d.step == a.step)) {
      found = &d;
      break;
    }
  }
  if (!found) return notFound(a.file + ": run " + std::to_string(run) + " has no tensor dump '" + a.tensor + "'");
  const auto& d = *found;
  std::printf("tensor   %s.%s (dump %lld, step %lld)\n", d.op_name.c_str(), d.argName().c_str(),
              static_cast<long long>(d.id), static_cast<long long>(d.step));
  std::printf("op type  %s\ndtype    %s\nshape    %s\nformat   %s\n", d.op_type.c_str(), d.dtype.c_str(), d.shape.c_str(),
              d.format.c_str());
  std::printf("min %s  max %s  mean %s  l2norm %s  nan %s  inf %s\n", formatExact(d.min).c_str(), formatExact(d.max).c_str(),
              formatExact(d.mean).c_str(), formatExact(d.l2norm).c_str(), d.nan_count ? std::to_string(*d.nan_count).c_str() : "-",
              d.inf_count ? std::to_string(*d.inf_count).c_str() : "-");
  if (d.data_ref >= 0) {
    std::printf("stored   with dump %lld (the same bytes, kept once per step)\n", static_cast<long long>(d.data_ref));
  }
  if (d.data_bytes == 0) {
    std::printf("(statistics only: no data to draw a histogram)\n");
    return Status::ok();
  }
  ASSIGN_OR_RETURN(TensorDumpData stored, reader->tensorDumpData(d.id));
  ASSIGN_OR_RETURN(std::vector<uint8_t> raw, tensor::decodeDumpPayload(stored.bytes, stored.zstd_frame));
  const tensor::DType t = tensor::parseDType(d.dtype);
  if (tensor::dtypeSize(t) == 0) return invalidArgument("unknown dtype " + d.dtype);
  const std::vector<double> v = tensor::toDoubles(raw.data(), t, raw.size() / tensor::dtypeSize(t));
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
  dumper::ExportOptions o;
  ASSIGN_OR_RETURN(o.format, dumper::parseExportFormat(a.format));
  ASSIGN_OR_RETURN(o.run_id, pickRunId(*reader, a.run));
  o.out_dir = a.out;
  if (a.step >= 0) o.step = a.step;
  ASSIGN_OR_RETURN(size_t files, dumper::exportDumps(*reader, o));
  std::printf("wrote %zu %s files to %s\n", files, a.format.c_str(), a.out.c_str());
  return Status::ok();
}

}  // namespace

void addDumpCommand(Commands& cli) {
  auto* dump = cli.app().add_subcommand("dump", "Tensor dumps of a trace file: list, show, export");
  dump->require_subcommand(1);

  auto list_args = std::make_shared<ListArgs>();
  auto* list = dump->add_subcommand("list", "List the dumped tensors of a run with their statistics");
  list->add_option("FILE", list_args->file, "Trace file")->required();
  list->add_option("--run", list_args->run, "Run id (default: the latest)");
  list->add_option("--step", list_args->step, "Only this step");
  list->add_option("--op", list_args->op, "Only ops whose name or type contains this text");
  cli.onParsed(list, [list_args] {
    const Status s = runList(*list_args);
    return s.isOk() ? 0 : fail(s);
  });

  auto show_args = std::make_shared<ShowArgs>();
  auto* show = dump->add_subcommand("show", "Show one tensor: statistics and a text histogram");
  show->add_option("FILE", show_args->file, "Trace file")->required();
  show->add_option("TENSOR", show_args->tensor, "Dump id, or op_name.io.idx (e.g. addmm.0.forward.output.0)")->required();
  show->add_option("--run", show_args->run, "Run id (default: the latest)");
  show->add_option("--step", show_args->step, "Step of the tensor (default: the first dumped)");
  show->add_option("--bins", show_args->bins, "Histogram bins")->capture_default_str();
  cli.onParsed(show, [show_args] {
    const Status s = runShow(*show_args);
    return s.isOk() ? 0 : fail(s);
  });

  auto export_args = std::make_shared<ExportArgs>();
  auto* exp = dump->add_subcommand("export", "Export a run's dumps as Ascend dump files or .npy");
  exp->add_option("FILE", export_args->file, "Trace file")->required();
  exp->add_option("--out", export_args->out, "Output directory")->required();
  exp->add_option("--format", export_args->format, "ascend or npy")->capture_default_str();
  exp->add_option("--run", export_args->run, "Run id (default: the latest)");
  exp->add_option("--step", export_args->step, "Only this step");
  cli.onParsed(exp, [export_args] {
    const Status s = runExport(*export_args);
    return s.isOk() ? 0 : fail(s);
  });
}

}  // namespace npuscope::cli
