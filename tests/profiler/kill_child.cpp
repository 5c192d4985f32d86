// Child of the kill test: records a training loop on npu into argv[1] until killed, printing
// "step N ops K t T" (T: monotonic ns when the step ended) after every step.
#include <torch/torch.h>

#include <cstdio>

#include "npuscope/store/clock.h"
#include "npuscope/device/npu.h"
#include "npuscope/profiler/session.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  namespace prof = npuscope::profiler;
  npuscope::RunInfo run;
  run.command = "kill_child";
  run.model = "mlp";
  auto s = prof::RecordingSession::start({argv[1], run, prof::Schedule()});
  if (!s.isOk()) {
    std::fprintf(stderr, "%s\n", s.status().message().c_str());
    return 1;
  }
  torch::manual_seed(0);
  // A training step of realistic weight (a few ms, like a small real model's), so the test is
  // about crash safety, not about outrunning the writer on a loaded machine.
  torch::nn::Sequential model(torch::nn::Linear(256, 512), torch::nn::ReLU(), torch::nn::Linear(512, 10));
  model->to(npuscope::npu::device(0));
  torch::optim::SGD opt(model->parameters(), 0.01);
  uint64_t before = 0;
  for (int64_t step = 0;; ++step) {
    at::Tensor x = at::randn({64, 256}).to(npuscope::npu::device(0));
    opt.zero_grad();
    auto loss = model->forward(x).pow(2).mean();
    loss.backward();
    opt.step();
    const prof::StepMetrics metrics{loss.item<double>()};  // item() is an op of this step too
    const uint64_t after = (*s)->recordedOps();
    (*s)->step(metrics);
    std::printf("step %lld ops %llu t %lld\n", static_cast<long long>(step),
                static_cast<unsigned long long>(after - before), static_cast<long long>(npuscope::nowNs()));
    std::fflush(stdout);
    before = (*s)->recordedOps();
  }
}
