// `npuscope train` end to end, as a user runs it: results printed, errors as one line + exit 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_run.h"

TEST(CliTrain, SyntheticRunLearnsAndReports) {
  CliRun r = run("train --dataset synthetic --model cnn --steps 40 --lr 0.05 --seed 3 --no-db");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("device           npu:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("steps            32"), std::string::npos) << r.out;  // 2048 / 64 = one epoch
  const auto pos = r.out.find("test accuracy    ");
  ASSERT_NE(pos, std::string::npos);
  const double acc = std::stod(r.out.substr(pos + 17));
  EXPECT_GT(acc, 0.5) << "the synthetic classes are separable; a working device learns them";
}

TEST(CliTrain, SameSeedSameResultOnNpuAndCpu) {
  CliRun a = run("train --dataset synthetic --model mlp --steps 10 --seed 7 --device npu:1 --no-db");
  CliRun b = run("train --dataset synthetic --model mlp --steps 10 --seed 7 --device cpu --no-db");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  auto loss = [](const std::string& s) { return s.substr(s.find("final loss"), 30); };
  EXPECT_EQ(loss(a.out), loss(b.out));
}

TEST(CliTrain, BadInputIsOneClearLineAndExitOne) {
  struct Case {
    const char* args;
    const char* expect;
  } cases[] = {
      {"train --model resnet9000", "unknown model 'resnet9000': expected one of mlp, cnn"},
      {"train --data /nonexistent", "/nonexistent/train-images-idx3-ubyte.gz: cannot open"},
      {"train --device npu:12 --dataset synthetic", "npu:12 does not exist"},
      {"train --device gpu:0 --dataset synthetic", "device 'gpu:0': expected npu, npu:N or N"},
      {"train --batch-size 0 --dataset synthetic", "--batch-size 0: expected at least 1"},
      {"train --dataset imagenet", "--dataset 'imagenet': expected fashion-mnist or synthetic"},
  };
  for (const auto& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string("npuscope: error: ") + c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(CliTrain, CorruptDatasetFileIsNamed) {
  const std::string dir = testing::TempDir() + "/bad_fmnist";
  std::system(("mkdir -p " + dir).c_str());
  std::ofstream(dir + "/train-images-idx3-ubyte.gz") << "this is not gzip idx";
  CliRun r = run("train --data " + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("train-images-idx3-ubyte.gz: not an IDX file"), std::string::npos) << r.out;
}
