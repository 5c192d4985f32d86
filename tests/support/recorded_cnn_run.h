// A real recorded run for the profiler's tests: the built-in CNN trained on npu:0 with SGD for a
// few steps (the autograd engine's backward thread included), one recording session around it.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "npuscope/device/npu.h"
#include "npuscope/profiler/session.h"
#include "npuscope/workloads/models.h"

namespace npuscope::testing_support {

// Records `steps` steps into a fresh `db` (run 1). Use with ASSERT_NO_FATAL_FAILURE.
inline void recordCnnRun(const std::string& db, int steps, const std::string& command) {
  for (const char* s : {"", "-wal", "-shm"}) std::remove((db + s).c_str());
  profiler::SessionOptions o;
  o.path = db;
  o.run.command = command;
  o.run.model = "cnn";
  auto session = profiler::RecordingSession::start(o);
  ASSERT_TRUE(session.isOk()) << session.status().message();
  torch::manual_seed(0);
  auto model = workloads::makeModel("cnn");
  ASSERT_TRUE(model.isOk());
  std::shared_ptr<workloads::Model> net = *model;
  net->to(npu::device(0));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const at::Tensor x = at::randn({16, 1, 28, 28}).to(npu::device(0));
  const at::Tensor y = at::randint(0, 10, {16}, at::kLong).to(npu::device(0));
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    (*session)->step(profiler::StepMetrics{loss.item<double>(), 1.0});
  }
  ASSERT_TRUE((*session)->stop().isOk());
}

}  // namespace npuscope::testing_support
