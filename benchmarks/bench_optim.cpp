// bench_optim: the fused optimizers against torch::optim and against this machine's memory
// bandwidth, measured in the same run (run with --benchmark_format=json).
//
// Counters of BM_FusedAdamVsTorch (10M fp32 parameters in ten 1M tensors, the three timed
// back to back in every iteration so drifts in machine load hit all of them alike; medians):
//   ratio_fused_adam_vs_torch  torch::optim::Adam step time / NpuFusedAdam step time (speedup,
//                              target >= 3)
//   fraction_of_triad          fused Adam's effective bandwidth (28 bytes per parameter: read p,
//                              g, m, v; write p, m, v) / STREAM-triad bandwidth (a = b + s*c,
//                              12 bytes per element, best of a plain loop and ATen's add_out)
//                              (target >= 0.6)
// BM_FusedStep/<optimizer>: one step time per optimizer (10M fp32 parameters), plus Adam with an
// fp16 model and fp32 masters; BM_MultiTensor/*: the primitives AMP uses every step.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "npuscope/optim/optim.h"

namespace {

using npuscope::optim::CombinedTensor;
using npuscope::optim::FusedOptimizerConfig;
using npuscope::optim::NpuFusedOptimizer;
using Clock = std::chrono::steady_clock;

constexpr int64_t kTensors = 10;
constexpr int64_t kPerTensor = 1'000'000;
constexpr int64_t kParams = kTensors * kPerTensor;

std::vector<at::Tensor> makeParams(at::ScalarType dtype = at::kFloat) {
  torch::manual_seed(0);
  std::vector<at::Tensor> params;
  for (int64_t i = 0; i < kTensors; ++i) {
    params.push_back(torch::randn({kPerTensor}).to(dtype).requires_grad_(true));
    params.back().mutable_grad() = torch::randn({kPerTensor}).mul_(1e-2).to(dtype);
  }
  return params;
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// STREAM triad as a plain loop, -O3 locally so it vectorises like the optimizer kernels do (this
// file is otherwise built at the project's -O2).
__attribute__((optimize("O3"))) void triadRange(float* __restrict a, const float* __restrict b,
                                                const float* __restrict c, float s, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

void triadLoop(float* a, const float* b, const float* c, float s, int64_t n) {
  at::parallel_for(0, n, 1 << 16, [&](int64_t begin, int64_t end) { triadRange(a, b, c, s, begin, end); });
}

void BM_FusedAdamVsTorch(benchmark::State& state) {
  std::vector<at::Tensor> torchParams = makeParams();
  std::vector<at::Tensor> fusedParams = makeParams();
  torch::optim::Adam torchAdam(torchParams, torch::optim::AdamOptions(1e-3));
  npuscope::optim::NpuFusedAdam fusedAdam(fusedParams);
  at::Tensor a = torch::zeros({kParams});
  at::Tensor b = torch::rand({kParams});
  at::Tensor c = torch::rand({kParams});
  auto triadPlain = [&] { triadLoop(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), 3.0f, kParams); };
  auto triadAten = [&] { at::add_out(a, b, c, 3.0); };
  for (int i = 0; i < 2; ++i) {  // warm-up: state allocation, page faults, caches
    torchAdam.step();
    fusedAdam.step();
    triadPlain();
    triadAten();
  }
  std::vector<double> torchTimes, fusedTimes, plainTimes, atenTimes;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    torchAdam.step();
    const auto t1 = Clock::now();
    fusedAdam.step();
    const auto t2 = Clock::now();
    triadPlain();
    const auto t3 = Clock::now();
    triadAten();
    const auto t4 = Clock::now();
    torchTimes.push_back(seconds(t0, t1));
    fusedTimes.push_back(seconds(t1, t2));
    plainTimes.push_back(seconds(t2, t3));
    atenTimes.push_back(seconds(t3, t4));
    state.SetIterationTime(seconds(t1, t2));
  }
  const double torchStep = median(torchTimes);
  const double fusedStep = median(fusedTimes);
  const double triad = std::min(median(plainTimes), median(atenTimes));
  const double fusedBandwidth = 28.0 * kParams / fusedStep;
  const double triadBandwidth = 12.0 * kParams / triad;
  state.counters["ratio_fused_adam_vs_torch"] = torchStep / fusedStep;
  state.counters["fraction_of_triad"] = fusedBandwidth / triadBandwidth;
  state.counters["torch_adam_ms"] = torchStep * 1e3;
  state.counters["fused_adam_ms"] = fusedStep * 1e3;
  state.counters["fused_adam_GBps"] = fusedBandwidth / 1e9;
  state.counters["triad_GBps"] = triadBandwidth / 1e9;
  state.counters["triad_plain_GBps"] = 12.0 * kParams / median(plainTimes) / 1e9;
  state.counters["triad_aten_GBps"] = 12.0 * kParams / median(atenTimes) / 1e9;
  state.counters["threads"] = at::get_num_threads();
}
BENCHMARK(BM_FusedAdamVsTorch)->UseManualTime()->Iterations(15)->Unit(benchmark::kMillisecond);

using Factory = std::function<std::unique_ptr<NpuFusedOptimizer>(const std::vector<at::Tensor>&)>;

// One step of a fused optimizer over 10M parameters; the first step (state allocation) is not
// timed.
void fusedStep(benchmark::State& state, const Factory& make, at::ScalarType dtype, bool masters) {
  std::vector<at::Tensor> params = makeParams(dtype);
  std::unique_ptr<NpuFusedOptimizer> opt = make(params);
  if (masters != opt->hasMasterWeights()) state.SkipWithError("unexpected master-weight mode");
  opt->step();
  for (auto _ : state) opt->step();
  state.counters["ns_per_param"] = benchmark::Counter(
      static_cast<double>(kParams) * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

template <typename Optimizer, typename Options>
Factory factory(Options options, FusedOptimizerConfig config = {}) {
  return [options, config](const std::vector<at::Tensor>& params) {
    return std::make_unique<Optimizer>(params, options, config);
  };
}

void registerFusedSteps() {
  using namespace npuscope::optim;
  NpuFusedSGDOptions sgd(0.01);
  sgd.momentum = 0.9;
  NpuFusedRMSpropOptions rms;
  rms.momentum = 0.9;
  NpuFusedRMSpropTFOptions rmsTf;
  rmsTf.momentum = 0.9;
  const std::vector<std::pair<const char*, Factory>> steps = {
      {"NpuFusedSGD", factory<NpuFusedSGD>(sgd)},
      {"NpuFusedAdam", factory<NpuFusedAdam>(NpuFusedAdamOptions{})},
      {"NpuFusedAdamW", factory<NpuFusedAdamW>(NpuFusedAdamWOptions{})},
      {"NpuFusedAdamP", factory<NpuFusedAdamP>(NpuFusedAdamPOptions{})},
      {"NpuFusedLamb", factory<NpuFusedLamb>(NpuFusedLambOptions{})},
      {"NpuFusedAdadelta", factory<NpuFusedAdadelta>(NpuFusedAdadeltaOptions{})},
      {"NpuFusedRMSprop", factory<NpuFusedRMSprop>(rms)},
      {"NpuFusedRMSpropTF", factory<NpuFusedRMSpropTF>(rmsTf)},
  };
  for (const auto& [name, make] : steps) {
    benchmark::RegisterBenchmark((std::string("BM_FusedStep/") + name).c_str(),
                                 [make = make](benchmark::State& s) { fusedStep(s, make, at::kFloat, false); })
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
  benchmark::RegisterBenchmark("BM_FusedStep/NpuFusedAdam_fp16_masters",
                               [](benchmark::State& s) {
                                 fusedStep(s, factory<NpuFusedAdam>(NpuFusedAdamOptions{}, FusedOptimizerConfig{true}),
                                           at::kHalf, true);
                               })
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.5);
}

// The per-step primitives of AMP over the same 10M parameters.
void BM_MultiTensorUnscale(benchmark::State& state) {
  std::vector<at::Tensor> grads;
  for (int64_t i = 0; i < kTensors; ++i) grads.push_back(torch::randn({kPerTensor}));
  const CombinedTensor buffer = CombinedTensor::combine(grads);
  at::Tensor foundInf = torch::zeros({1});
  for (auto _ : state) npuscope::optim::scaleTensors(buffer, buffer, 1.0, foundInf);
  state.counters["bytes_per_s"] = benchmark::Counter(8.0 * kParams, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MultiTensorUnscale)->Unit(benchmark::kMillisecond)->MinTime(0.5);

void BM_MultiTensorL2Norm(benchmark::State& state) {
  std::vector<at::Tensor> grads;
  for (int64_t i = 0; i < kTensors; ++i) grads.push_back(torch::randn({kPerTensor}));
  const CombinedTensor buffer = CombinedTensor::combine(grads);
  double sink = 0.0;
  for (auto _ : state) benchmark::DoNotOptimize(sink += npuscope::optim::l2Norm(buffer));
  state.counters["bytes_per_s"] = benchmark::Counter(4.0 * kParams, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MultiTensorL2Norm)->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  // at::get_num_threads() starts at 1 here; use every core, for torch and the fused kernels alike.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  registerFusedSteps();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
