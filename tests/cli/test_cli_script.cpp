// `npuscope train --model FILE.pt`: a TorchScript module (written here the way Python's
// torch.jit.save would) trains with the same loop, and a file that is not one is named.
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_run.h"

namespace {

std::string scriptedMlp() {
  const std::string path = testing::TempDir() + "/npuscope_scripted_mlp.pt";
  torch::manual_seed(0);
  torch::jit::Module m("ScriptedMlp");
  m.register_parameter("w1", torch::randn({784, 64}) * 0.05, false);
  m.register_parameter("b1", torch::zeros({64}), false);
  m.register_parameter("w2", torch::randn({64, 10}) * 0.1, false);
  m.register_parameter("b2", torch::zeros({10}), false);
  m.define(R"(
    def forward(self, x):
        h = torch.relu(torch.matmul(x.flatten(1), self.w1) + self.b1)
        return torch.matmul(h, self.w2) + self.b2
  )");
  m.save(path);
  return path;
}

TEST(CliScript, TorchScriptModelTrainsUnderAmp) {
  const std::string model = scriptedMlp();
  for (const char* level : {"O0", "O1", "O2"}) {
    CliRun r = run("train --model " + model + " --dataset synthetic --steps 32 --lr 0.05 --seed 1 --no-db --opt-level " +
                   level);
    ASSERT_EQ(r.exit_code, 0) << level << "\n" << r.out;
    const auto pos = r.out.find("test accuracy    ");
    ASSERT_NE(pos, std::string::npos) << r.out;
    EXPECT_GT(std::stod(r.out.substr(pos + 17)), 0.5) << level << ": the synthetic classes are separable\n" << r.out;
  }
}

TEST(CliScript, NotATorchScriptFileIsNamed) {
  const std::string junk = testing::TempDir() + "/npuscope_not_a_model.pt";
  std::ofstream(junk) << "not a zip archive";
  CliRun r = run("train --model " + junk + " --dataset synthetic --steps 1 --no-db");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("npuscope: error: " + junk + ": cannot load a TorchScript model"), std::string::npos) << r.out;
}

}  // namespace
