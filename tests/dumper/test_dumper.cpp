// The op dumper on the npu: Ascend dump files (protoc decodes them, payload sizes add up, fp16 is
// data_type 2), dump_mode / dump_step filters, overflow localisation, and compare of two
// identical captured runs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "npuscope/core/compare.h"
#include "npuscope/core/trace_reader.h"
#include "npuscope/core/trace_writer.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dump_file.h"
#include "npuscope/dumper/dumper.h"

namespace npuscope::dumper {
namespace {

namespace fs = std::filesystem;

fs::path tempDir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("npuscope_dumper_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// One training-like step on the npu: matmul + relu forward, backward, and an fp16 add.
void step(int64_t s, bool inject_inf = false) {
  torch::manual_seed(1234 + s);
  const auto dev = npu::device(0);
  at::Tensor x = torch::randn({2, 4}).to(dev);
  at::Tensor w = torch::randn({4, 3}).to(dev).requires_grad_();
  at::Tensor y = at::relu(at::mm(x, w));
  if (inject_inf) y = y * std::numeric_limits<float>::infinity();
  y.sum().backward();
  at::Tensor h = x.to(at::kHalf);
  at::Tensor h2 = at::add(h, h);
  (void)h2;
}

// Runs `steps` steps with the dumper on, into `writer` when given.
void runDumped(const DumpConfig& config, int steps, TraceWriter* writer, int inf_step = -1) {
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(config).isOk());
  d.attach(writer);
  ASSERT_TRUE(d.start().isOk());
  for (int s = 0; s < steps; ++s) {
    d.setStep(s);
    step(s, s == inf_step);
  }
  EXPECT_TRUE(d.stop().isOk()) << d.status().message();
  EXPECT_EQ(npu::op_observer(), nullptr);
}

std::string protocDecode(const fs::path& file, const fs::path& work) {
  std::ifstream in(file, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<uint8_t>(all[i])) << (8 * i);
  const fs::path header = work / "header.bin", text = work / "header.txt";
  std::ofstream(header, std::ios::binary).write(all.data() + 8, static_cast<std::streamsize>(len));
  const std::string proto_dir = std::string(NPUSCOPE_SOURCE_DIR) + "/core/proto";
  const std::string cmd = "protoc --decode toolkit.dumpdata.DumpData --proto_path=" + proto_dir + " " + proto_dir +
                          "/dump_data.proto < " + header.string() + " > " + text.string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream t(text);
  return std::string((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
}

TEST(DumperTest, AscendFilesDecodeAndPayloadsAddUp) {
  const fs::path dir = tempDir("files");
  DumpConfig c;
  c.dump_path = (dir / "dumps").string();
  runDumped(c, 1, nullptr);
  const std::string out = Dumper::instance().dumpDirectory();
  ASSERT_FALSE(out.empty());
  size_t files = 0, fp16_tensors = 0, backward_files = 0;
  bool protoc_checked = false;
  for (const auto& e : fs::directory_iterator(out)) {
    ++files;
    auto f = readDumpFile(e.path().string());  // checks that the payload sizes add up to the file
    ASSERT_TRUE(f.isOk()) << f.status().message();
    EXPECT_NE(e.path().filename().string().find(f->op_name), std::string::npos);
    if (f->op_name.find(".backward") != std::string::npos) ++backward_files;
    for (const auto* list : {&f->inputs, &f->outputs}) {
      for (const auto& t : *list) {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        EXPECT_EQ(t.data.size(), static_cast<size_t>(n) * compare::dtypeSize(t.dtype)) << e.path();
        if (t.dtype == compare::DType::kFloat16) {
          ++fp16_tensors;
          EXPECT_EQ(t.acl_data_type, 2);
        }
      }
    }
    if (!protoc_checked && f->op_name.rfind("add.", 0) == 0 && !f->inputs.empty() &&
        f->inputs[0].dtype == compare::DType::kFloat16) {
      const std::string text = protocDecode(e.path(), dir);
      EXPECT_NE(text.find("op_name: \"" + f->op_name + "\""), std::string::npos) << text;
      EXPECT_NE(text.find("data_type: DT_FLOAT16"), std::string::npos) << text;
      EXPECT_NE(text.find("size: 16"), std::string::npos) << text;  // 2x4 fp16
      protoc_checked = true;
    }
  }
  EXPECT_GE(files, 5u);
  EXPECT_GT(fp16_tensors, 0u);
  EXPECT_GT(backward_files, 0u);
  EXPECT_TRUE(protoc_checked);
  EXPECT_EQ(Dumper::instance().counters().files, files);
  fs::remove_all(dir);
}

TEST(DumperTest, ModeAndStepFiltersHold) {
  const fs::path dir = tempDir("filters");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
  auto c = DumpConfig::fromJson(R"({"dump": {"dump_mode": "input", "dump_step": "1", "dump_data": "stats"}})");
  ASSERT_TRUE(c.isOk());
  runDumped(*c, 3, w->get());
  ASSERT_TRUE((*w)->endRun("completed").isOk());
  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk());
  auto rows = (*r)->tensorDumps((*w)->runId());
  ASSERT_TRUE(rows.isOk());
  ASSERT_FALSE(rows->empty());
  bool mm = false;
  for (const auto& d : *rows) {
    EXPECT_EQ(d.step, 1);
    EXPECT_EQ(d.io, "input");
    EXPECT_EQ(d.data_bytes, 0);  // stats only
    EXPECT_TRUE(d.min && d.max && d.mean && d.l2norm && d.nan_count && d.inf_count);
    mm |= d.op_name == "mm.0.forward" && d.op_type == "aten::mm";
  }
  EXPECT_TRUE(mm);
  fs::remove_all(dir);
}

TEST(DumperTest, InjectedInfIsTheFirstOverflowingOpOfItsStep) {
  const fs::path dir = tempDir("overflow");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
  DumpConfig c;
  c.data = DumpDataKind::kOverflow;
  c.overflow_limit = 1;
  runDumped(c, 4, w->get(), /*inf_step=*/2);
  ASSERT_TRUE((*w)->endRun("completed").isOk());
  const auto hits = Dumper::instance().overflows();
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].step, 2);
  EXPECT_EQ(hits[0].op_name, "mul.0.forward");

  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk());
  auto events = (*r)->overflowEvents((*w)->runId());
  ASSERT_TRUE(events.isOk());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].step, 2);
  EXPECT_EQ((*events)[0].source, "dump_check");
  EXPECT_EQ((*events)[0].op_name, "mul.0.forward");
  auto rows = (*r)->tensorDumps((*w)->runId());
  ASSERT_TRUE(rows.isOk());
  bool input = false, output_inf = false;
  for (const auto& d : *rows) {
    EXPECT_EQ(d.op_name, "mul.0.forward");
    input |= d.io == "input" && d.data_bytes > 0;
    output_inf |= d.io == "output" && d.inf_count.value_or(0) > 0;
  }
  EXPECT_TRUE(input);
  EXPECT_TRUE(output_inf);
  fs::remove_all(dir);
}

TEST(DumperTest, CompareOfTwoIdenticalCapturedRuns) {
  const fs::path dir = tempDir("compare");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  int64_t runs[2];
  for (int i = 0; i < 2; ++i) {
    runs[i] = *(*w)->beginRun(RunInfo{});
    runDumped(DumpConfig(), 2, w->get());
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk());
  auto res = compare::compareRuns(**r, runs[1], **r, runs[0]);
  ASSERT_TRUE(res.isOk()) << res.status().message();
  ASSERT_GT(res->rows.size(), 10u);
  for (const auto& row : res->rows) {
    ASSERT_TRUE(row.has_metrics) << row.tensorName() << " " << row.message;
    EXPECT_EQ(row.metrics.cosine, 1.0) << row.tensorName();
    EXPECT_EQ(row.metrics.max_abs_err, 0.0) << row.tensorName();
    EXPECT_EQ(row.verdict, compare::Verdict::kPass);
  }
  EXPECT_TRUE(res->first_divergent_op.empty());
  if (::testing::Test::HasFailure()) {
    for (const auto& row : res->rows) std::printf("%lld %s %s %s\n", (long long)row.step, row.tensorName().c_str(), row.npu_shape.c_str(), compare::verdictName(row.verdict));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace npuscope::dumper
