// `npuscope ops`: operator coverage analysis of a model's training step, as a porting engineer
// does it before moving a model to the NPU: every ATen op the step uses (forward, backward,
// optimizer), how often, with which dtypes, and how the emulated NPU runs it.
#include "cli/commands.h"
#include "npuscope/store/damage_warning.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <map>
#include <string>

#include "npuscope/analysis/op_support.h"
#include "npuscope/store/format.h"
#include "npuscope/analysis/op_table_csv.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/device/npu.h"
#include "npuscope/device/op_dispatch.h"
#include "npuscope/profiler/op_usage.h"
#include "npuscope/workloads/models.h"

namespace npuscope::cli {
namespace {

struct OpsOptions {
  std::string model = "cnn";
  std::string device = "npu:0";
  std::string dtype = "float32";  // float32 | float16 | bfloat16: the model's parameters and inputs
  int64_t batch_size = 64;
  std::string format = "text";  // text | csv
  // A trace file instead of a built-in model: the ops a recorded or imported run (a GPU trace,
  // a user's script) called, each judged against torch_npu's list. `run`: -1 the latest.
  std::string file;
  int64_t run = -1;
  bool csv = false;  // --csv (sets `format`)
};


enum Phase { kForward = 0, kBackward = 1, kOptimizer = 2 };
const char* kPhaseNames[] = {"forward", "backward", "optimizer"};

// What a real torch_npu would do with the op (analysis/op_support.h).
std::string onTorchNpu(const std::string& name) {
  const OpSupport s = opSupport(name);
  // The list entry that decided, when it is another op (e.g. _copy_from judged as copy_).
  const std::string_view base = std::string_view(name).substr(0, name.find('.'));
  const bool other = !s.entry.empty() && s.entry.substr(0, s.entry.find('.')) != base;
  switch (s.level) {
    case OpSupportLevel::kNative:
      if (s.via_functional) return "native (as its functional form)";
      return other ? "native (as " + std::string(s.entry.substr(0, s.entry.find('.'))) + ")" : "native";
    case OpSupportLevel::kCustom: return s.ours ? "custom (npuscope's)" : "custom";
    case OpSupportLevel::kComposite: return "composite";
    case OpSupportLevel::kAiCpu: return "AI CPU";
    case OpSupportLevel::kFallback: return "host fallback";
    case OpSupportLevel::kUnsupported: return "unsupported: fails";
    case OpSupportLevel::kNoKernel: return "no NPU kernel: fails";
    case OpSupportLevel::kUnknown: break;
  }
  return "not in the list";
}

// `ops FILE`: the ops a run called (host ops of its trace), with what torch_npu would do with
// each and the share of op time that would not run natively.
int runOpsOfFile(const OpsOptions& o) {
  auto reader = TraceReader::open(o.file);
  if (!reader.isOk()) return fail(reader.status().message());
  DamageWarning damage(**reader);
  auto run = o.run >= 0 ? (*reader)->run(o.run) : (*reader)->latestRun();
  if (!run.isOk()) return fail(run.status().message());
  OpAggregateQuery q;
  q.run_id = run->id;
  q.sort = OpSortKey::kTotalTime;
  auto table = (*reader)->opAggregates(q);
  if (!table.isOk()) return fail(o.file + ": " + table.status().message());
  if (o.format == "csv") {
    std::printf("Op,Calls,Total ns,Self ns,torch_npu\n");
  } else {
    std::printf("ops of run %lld (%s%s) in %s\n\n", static_cast<long long>(run->id),
                run->imported() ? ("imported " + run->source).c_str() : run->command.c_str(),
                run->model.empty() ? "" : (" " + run->model).c_str(), o.file.c_str());
    std::printf("%-52s %8s  %12s  %12s  %s\n", "Op", "Calls", "Total", "Self", "A real torch_npu");
    std::printf("%s\n", std::string(120, '-').c_str());
  }
  std::map<std::string, int> real;  // verdict -> ops
  int64_t not_native_self = 0;
  int judged = 0;
  for (const OpAggregate& a : table->rows) {
    // Only operators: ATen and torch_npu's own; annotations, autograd nodes and Python frames are not.
    if (a.name.rfind("aten::", 0) != 0 && a.name.rfind("npu::", 0) != 0) continue;
    ++judged;
    const std::string npu_real = onTorchNpu(a.name);
    std::string verdict = npu_real.substr(0, npu_real.find_first_of(":("));
    while (!verdict.empty() && verdict.back() == ' ') verdict.pop_back();
    ++real[verdict];
    const OpSupportLevel level = opSupport(a.name).level;
    if (level == OpSupportLevel::kFallback || level == OpSupportLevel::kUnsupported ||
        level == OpSupportLevel::kNoKernel || level == OpSupportLevel::kAiCpu) {
      not_native_self += a.self_ns;
    }
    if (o.format == "csv") {
      std::printf("%s,%lld,%lld,%lld,%s\n", csvField(a.name).c_str(), static_cast<long long>(a.calls),
                  static_cast<long long>(a.total_ns), static_cast<long long>(a.self_ns), csvField(npu_real).c_str());
    } else {
      std::printf("%-52s %8lld  %12s  %12s  %s\n", a.name.c_str(), static_cast<long long>(a.calls),
                  formatDuration(a.total_ns).c_str(), formatDuration(a.self_ns).c_str(), npu_real.c_str());
    }
  }
  if (o.format == "text") {
    std::string verdicts;
    for (const auto& [v, n] : real) verdicts += (verdicts.empty() ? "" : ", ") + std::to_string(n) + " " + v;
    std::printf("\n%d distinct operators on a real device (%s): %s\n", judged,
                std::string(opSupportVersion()).c_str(), verdicts.empty() ? "none" : verdicts.c_str());
    if (table->self_sum_ns > 0 && not_native_self > 0) {
      std::printf("%s of self time (%.1f%%) is in ops a real device would not run natively\n",
                  formatDuration(not_native_self).c_str(),
                  100.0 * static_cast<double>(not_native_self) / static_cast<double>(table->self_sum_ns));
    }
  }
  return 0;
}

int runOps(const OpsOptions& o) {
  if (!o.file.empty()) {
    if (o.format != "text" && o.format != "csv") return fail("--format '" + o.format + "': expected text or csv");
    return runOpsOfFile(o);
  }
  if (o.batch_size < 1) return fail("--batch-size " + std::to_string(o.batch_size) + ": expected at least 1");
  if (o.format != "text" && o.format != "csv") return fail("--format '" + o.format + "': expected text or csv");
  at::ScalarType dtype;
  if (o.dtype == "float32") {
    dtype = at::kFloat;
  } else if (o.dtype == "float16") {
    dtype = at::kHalf;
  } else if (o.dtype == "bfloat16") {
    dtype = at::kBFloat16;
  } else {
    return fail("--dtype '" + o.dtype + "': expected float32, float16 or bfloat16");
  }
  c10::Device device(c10::kCPU);
  try {
    device = npu::parse_torch_device(o.device);
  } catch (const std::exception& e) {
    return fail(std::string("--device: ") + e.what());
  }
  auto model = workloads::makeModel(o.model);
  if (!model.isOk()) return fail("--model: " + model.status().message());
  std::shared_ptr<workloads::Model> net = *model;
  net->to(device, dtype);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const at::Tensor x = at::randn({o.batch_size, 1, 28, 28}).to(device, dtype);
  const at::Tensor y = at::randint(0, 10, {o.batch_size}, at::kLong).to(device);

  std::map<std::string, profiler::OpUsage> used;
  {
    profiler::OpUsageCollector collector;
    try {
      collector.setPhase(kForward);
      opt.zero_grad();
      at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x).to(at::kFloat), y);
      collector.setPhase(kBackward);
      loss.backward();
      collector.setPhase(kOptimizer);
      opt.step();
    } catch (const std::exception& e) {
      std::string what = e.what();
      return fail("the training step failed: " + what.substr(0, what.find('\n')));
    }
    used = collector.ops();
  }

  if (o.format == "csv") {
    std::printf("Op,Calls,Dtypes,Phases,Support,torch_npu\n");
  } else {
    std::printf("ops of one %s training step (%s, batch %lld) on %s\n\n", o.model.c_str(), o.dtype.c_str(),
                static_cast<long long>(o.batch_size), npu::format_device(device).c_str());
    std::printf("%-44s %6s  %-20s %-26s %-52s %s\n", "Op", "Calls", "Dtypes", "Phases", "Emulator runs it as",
                "A real torch_npu");
    std::printf("%s\n", std::string(166, '-').c_str());
  }
  int refused = 0, low = 0;
  std::map<std::string, int> real;  // torch_npu verdict -> ops
  for (const auto& [name, u] : used) {
    std::string dtypes, phases;
    for (const auto& d : u.dtypes) dtypes += (dtypes.empty() ? "" : " ") + d;
    for (int p : u.phases) phases += (phases.empty() ? "" : " ") + std::string(kPhaseNames[p]);
    const std::string how = npu::emulatedKernelOf(name, u.low_precision, u.fp64);
    const std::string npu_real = onTorchNpu(name);
    std::string verdict = npu_real.substr(0, npu_real.find_first_of(":("));
    while (!verdict.empty() && verdict.back() == ' ') verdict.pop_back();
    ++real[verdict];
    refused += u.fp64;
    low += u.low_precision;
    if (o.format == "csv") {
      std::printf("%s,%lld,%s,%s,%s,%s\n", csvField(name).c_str(), static_cast<long long>(u.calls),
                  csvField(dtypes).c_str(), csvField(phases).c_str(), csvField(how).c_str(), csvField(npu_real).c_str());
    } else {
      std::printf("%-44s %6lld  %-20s %-26s %-52s %s\n", name.c_str(), static_cast<long long>(u.calls), dtypes.c_str(),
                  phases.c_str(), how.c_str(), npu_real.c_str());
    }
  }
  if (o.format == "text") {
    std::printf("\n%zu distinct ops: %zu supported, %d refused, %d took the fp16/bf16 -> fp32 path\n",
                used.size(), used.size() - static_cast<size_t>(refused), refused, low);
    std::string verdicts;
    for (const auto& [v, n] : real) verdicts += (verdicts.empty() ? "" : ", ") + std::to_string(n) + " " + v;
    std::printf("on a real device (%s): %s\n", std::string(opSupportVersion()).c_str(), verdicts.c_str());
  }
  return refused > 0 ? 2 : 0;
}

}  // namespace

void addOpsCommand(Commands& cli) {
  auto o = std::make_shared<OpsOptions>();
  OpsOptions& ops = *o;
  auto* ops_cmd = cli.app().add_subcommand(kOpsCommand.name, kOpsCommand.description);
  ops_cmd->add_option("file", ops.file, "Trace file (recorded or imported); without it, a built-in model's step");
  ops_cmd->add_option("--run", ops.run, "Run id in the file (default: the latest run)");
  ops_cmd->add_option("--model", ops.model, "Built-in model")->capture_default_str();
  ops_cmd->add_option("--device", ops.device, "npu:N")->capture_default_str();
  ops_cmd->add_option("--dtype", ops.dtype, "float32, float16 or bfloat16")->capture_default_str();
  ops_cmd->add_option("--batch-size", ops.batch_size, "Samples in the step")->capture_default_str();
  ops_cmd->add_flag("--csv", o->csv, "CSV on stdout");
  cli.onParsed(ops_cmd, [o] {
    if (o->csv) o->format = "csv";
    return runOps(*o);
  });
}

}  // namespace npuscope::cli
