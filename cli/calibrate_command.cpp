// `npuscope calibrate`: the cost model against a real card's kernels (npu/calibration.h): every
// compute kernel of a torch_npu export's kernel_details.csv costed from its shapes and dtypes as
// the emulator costs the aten op it implements; per kernel type the calls, real and predicted
// time and the spread of predicted / real, overall the geometric mean and sd, and the share of
// real time in types the model does not cost.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "npuscope/device/calibration.h"
#include "npuscope/import/import.h"

namespace npuscope::cli {
namespace {

struct CalibrateOptions {
  std::string path;
  bool json = false;
};

int runCalibrate(const CalibrateOptions& o) {
  auto table = import::kernelDetailsTable(o.path);
  if (!table.isOk()) return fail(table.status().message());
  const int64_t c_type = table->column("Type"), c_dur = table->column("Duration(us)"),
                c_core = table->column("Accelerator Core"), c_in = table->column("Input Shapes"),
                c_out = table->column("Output Shapes"), c_dt = table->column("Input Data Types"),
                c_odt = table->column("Output Data Types"), c_ifmt = table->column("Input Formats"),
                c_ofmt = table->column("Output Formats");
  for (auto [name, c] : {std::pair{"Type", c_type}, {"Duration(us)", c_dur}, {"Input Shapes", c_in}, {"Output Shapes", c_out}}) {
    if (c < 0) return fail(table->path + ": line 1: no column '" + name + "' (calibrate needs the kernels' shapes)");
  }
  std::vector<npu::RealKernel> kernels;
  int64_t line = 1;
  for (const auto& row : table->rows) {
    ++line;
    auto cell = [&](int64_t c) { return c >= 0 && static_cast<size_t>(c) < row.size() ? row[c] : std::string(); };
    npu::RealKernel k;
    k.type = cell(c_type);
    k.core = cell(c_core);
    try {
      size_t used = 0;
      k.real_us = std::stod(cell(c_dur), &used);
    } catch (const std::exception&) {
      return fail(table->path + ": line " + std::to_string(line) + ": bad Duration(us) '" + cell(c_dur) + "'");
    }
    k.input_shapes = cell(c_in);
    k.output_shapes = cell(c_out);
    k.input_dtypes = cell(c_dt);
    k.output_dtypes = cell(c_odt);
    k.input_formats = cell(c_ifmt);
    k.output_formats = cell(c_ofmt);
    kernels.push_back(std::move(k));
  }
  const npu::Calibration c = npu::calibrate(kernels);
  if (o.json) {
    nlohmann::json j = {{"source", table->path}, {"costed", c.costed}, {"real_us", c.real_us}, {"model_us", c.model_us},
                        {"geomean", c.geomean}, {"geometric_sd", c.geometric_sd}, {"compute_us", c.compute_us},
                        {"uncosted_share", c.uncostedShare()},
                        {"predicted_compute_ratio", c.compute_us > 0 ? c.model_us / c.compute_us : 0.0},
                        {"types_outside", c.typesOutside(npu::kCalibrationShare, npu::kCalibrationLow, npu::kCalibrationHigh)}};
    j["types"] = nlohmann::json::array();
    for (const auto& t : c.types) {
      j["types"].push_back({{"type", t.type}, {"calls", t.calls}, {"real_us", t.real_us}, {"model_us", t.model_us},
                            {"geomean", t.geomean}, {"min", t.min}, {"max", t.max},
                            {"share", c.compute_us > 0 ? t.real_us / c.compute_us : 0}});
    }
    j["uncosted"] = nlohmann::json::array();
    for (const auto& [type, us] : c.uncosted) j["uncosted"].push_back({{"type", type}, {"real_us", us}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %zu kernels, %lld costed\n", table->path.c_str(), kernels.size(), static_cast<long long>(c.costed));
  std::printf("\nPredicted / real per kernel type (by real time)\n\n");
  std::printf("%-28s %6s %7s %12s %12s %9s %9s %9s\n", "Type", "Calls", "Share", "Real us", "Predicted us", "Geomean",
              "Min", "Max");
  std::printf("%s\n", std::string(100, '-').c_str());
  for (const auto& t : c.types) {
    std::printf("%-28s %6lld %6.2f%% %12.1f %12.1f %9.3f %9.3f %9.3f\n", t.type.c_str(), static_cast<long long>(t.calls),
                c.compute_us > 0 ? 100 * t.real_us / c.compute_us : 0, t.real_us, t.model_us, t.geomean, t.min, t.max);
  }
  std::printf("%s\n", std::string(100, '-').c_str());
  if (c.costed > 0) {
    std::printf("all costed: %lld kernels, real %.1f us, predicted %.1f us (%.3f), geometric mean %.3f, geometric sd x%.2f\n",
                static_cast<long long>(c.costed), c.real_us, c.model_us, c.model_us / c.real_us, c.geomean, c.geometric_sd);
  }
  std::printf("not costed: %.1f %% of the %.1f us of compute kernels", 100 * c.uncostedShare(), c.compute_us);
  for (size_t i = 0; i < c.uncosted.size() && i < 8; ++i) {
    std::printf("%s %s %.1f us", i == 0 ? ":" : ",", c.uncosted[i].first.c_str(), c.uncosted[i].second);
  }
  std::printf("%s\n", c.uncosted.size() > 8 ? ", ..." : "");
  // Step level: the whole compute time the model predicts (uncosted kernels count as nothing)
  // against the real one, which is the export's step_trace_time.csv Computing.
  std::printf("predicted compute time: %.1f us of the real %.1f us (%.3f)\n", c.model_us, c.compute_us,
              c.compute_us > 0 ? c.model_us / c.compute_us : 0.0);
  const std::vector<std::string> off = c.typesOutside(npu::kCalibrationShare, npu::kCalibrationLow, npu::kCalibrationHigh);
  std::printf("types with >= %.0f %% of the time outside %.2f-%.2fx: ", 100 * npu::kCalibrationShare, npu::kCalibrationLow, npu::kCalibrationHigh);
  for (size_t i = 0; i < off.size(); ++i) std::printf("%s%s", i ? ", " : "", off[i].c_str());
  std::printf("%s\n", off.empty() ? "none" : "");
  std::printf("(communication kernels left out; the model: docs/device.md, \"Calibration\")\n");
  return 0;
}

}  // namespace

void addCalibrateCommand(Commands& cli) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* c = cli.app().add_subcommand(kCalibrateCommand.name, kCalibrateCommand.description);
  c->add_option("path", o->path, "kernel_details.csv, or the *_ascend_pt folder holding it")->required();
  c->add_flag("--json", o->json, "Print the table as JSON");
  cli.onParsed(c, [o] { return runCalibrate(*o); });
}

}  // namespace npuscope::cli
