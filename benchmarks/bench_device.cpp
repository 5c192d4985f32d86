// bench_device: the emulated NPU against the CPU it runs on, as ratios measured in one run.
//   ratio_small_op_vs_cpu     add_ on 16 floats, npu / CPU                  target <= 2.0
//   ratio_mm512_vs_cpu        fp32 512x512 mm, npu / CPU                    target <= 1.05
//   ratio_fp16_mm512_vs_fp32  npu fp16 mm / npu fp32 mm                     target <= 1.3
//   ratio_cnn_step_vs_cpu     one training step of the test CNN, npu / CPU  target <= 1.15
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "npuscope/device/npu.h"
#include "ratio.h"

namespace npu = npuscope::npu;
using npuscope::bench::measureRatio;
using npuscope::bench::reportRatio;

namespace {

void BM_SmallOp(benchmark::State& state) {
  at::Tensor c = at::ones({16}), c2 = at::ones({16});
  at::Tensor n = c.to(npu::device(0)), n2 = c2.to(npu::device(0));
  auto r = measureRatio(state, [&] { n.add_(n2); }, [&] { c.add_(c2); }, 2000);
  reportRatio(state, "ratio_small_op_vs_cpu", r, "npu", "cpu");
}
BENCHMARK(BM_SmallOp)->Iterations(60)->Unit(benchmark::kMicrosecond);

void BM_Mm512(benchmark::State& state) {
  at::manual_seed(0);
  at::Tensor a = at::randn({512, 512}), b = at::randn({512, 512});
  at::Tensor na = a.to(npu::device(0)), nb = b.to(npu::device(0));
  auto r = measureRatio(state, [&] { benchmark::DoNotOptimize(at::mm(na, nb)); },
                        [&] { benchmark::DoNotOptimize(at::mm(a, b)); }, 20);
  reportRatio(state, "ratio_mm512_vs_cpu", r, "npu", "cpu");
}
BENCHMARK(BM_Mm512)->Iterations(30)->Unit(benchmark::kMillisecond);

void BM_Fp16Mm512(benchmark::State& state) {
  at::manual_seed(0);
  at::Tensor na = at::randn({512, 512}).to(npu::device(0)), nb = at::randn({512, 512}).to(npu::device(0));
  at::Tensor ha = na.to(at::kHalf), hb = nb.to(at::kHalf);
  auto r = measureRatio(state, [&] { benchmark::DoNotOptimize(at::mm(ha, hb)); },
                        [&] { benchmark::DoNotOptimize(at::mm(na, nb)); }, 20);
  reportRatio(state, "ratio_fp16_mm512_vs_fp32", r, "fp16", "fp32");
}
BENCHMARK(BM_Fp16Mm512)->Iterations(30)->Unit(benchmark::kMillisecond);

// The test CNN: two conv + pooling blocks and a classifier.
struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 16, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(16, 32, 3).padding(1)};
  torch::nn::Linear fc{32 * 7 * 7, 10};
  CnnImpl() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("fc", fc);
  }
  at::Tensor forward(at::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return fc(x.flatten(1));
  }
};
TORCH_MODULE(Cnn);

struct CnnStep {
  Cnn model;
  torch::optim::SGD opt;
  at::Tensor x, y;
  CnnStep(c10::Device d, const at::Tensor& cx, const at::Tensor& cy)
      : opt(model->parameters(), torch::optim::SGDOptions(0.01)) {
    model->to(d);  // set_data keeps the parameters the optimizer already holds
    x = cx.to(d);
    y = cy.to(d);
  }
  void step() {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
  }
};

void BM_CnnStep(benchmark::State& state) {
  torch::manual_seed(0);
  at::Tensor x = at::randn({64, 1, 28, 28});
  at::Tensor y = at::randint(0, 10, {64}, at::kLong);
  CnnStep n(npu::device(0), x, y), c(c10::Device(c10::kCPU), x, y);
  auto r = measureRatio(state, [&] { n.step(); }, [&] { c.step(); }, 3);
  reportRatio(state, "ratio_cnn_step_vs_cpu", r, "npu", "cpu");
}
BENCHMARK(BM_CnnStep)->Iterations(20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
