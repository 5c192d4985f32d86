// The op dumper on the npu: Ascend dump files (protoc decodes them, payload sizes add up, fp16 is
// data_type 2), dump_mode / dump_step filters, overflow localisation, compare of two identical
// captured runs, the sizing pass and the free-space refusal, the update phase, and write errors
// (dump_path removed, file size limit) that stop dumping while training goes on.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "npuscope/analysis/compare.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"
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

// The default config with Ascend files under `dir`/dumps.
DumpConfig withFiles(const fs::path& dir) {
  DumpConfig c;
  c.dump_path = (dir / "dumps").string();
  return c;
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
  const std::string proto_dir = std::string(NPUSCOPE_SOURCE_DIR) + "/dumper/proto";
  const std::string cmd = "protoc --decode toolkit.dumpdata.DumpData --proto_path=" + proto_dir + " " + proto_dir +
                          "/dump_data.proto < " + header.string() + " > " + text.string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream t(text);
  return std::string((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
}

TEST(DumperTest, AscendFilesDecodeAndPayloadsAddUp) {
  const fs::path dir = tempDir("files");
  const DumpConfig c = withFiles(dir);
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
        EXPECT_EQ(t.data.size(), static_cast<size_t>(n) * tensor::dtypeSize(t.dtype)) << e.path();
        if (t.dtype == tensor::DType::kFloat16) {
          ++fp16_tensors;
          EXPECT_EQ(t.acl_data_type, 2);
        }
      }
    }
    if (!protoc_checked && f->op_name.rfind("add.", 0) == 0 && !f->inputs.empty() &&
        f->inputs[0].dtype == tensor::DType::kFloat16) {
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

// Each tensor_dumps row reads back the very bytes of its op's Ascend file; a payload repeated
// within a step (relu's input is mm's output) is stored once and the later row refers to it.
TEST(DumperTest, RowsHoldTheBytesOfTheAscendFilesAndRepeatedPayloadsAreStoredOnce) {
  const fs::path dir = tempDir("shared");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(RunInfo{}).isOk());
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(withFiles(dir)).isOk());
  d.attach(w->get());
  ASSERT_TRUE(d.start().isOk());
  for (int s = 0; s < 2; ++s) {
    d.setStep(s);
    torch::manual_seed(s);
    const auto dev = npu::device(0);
    at::Tensor x = torch::randn({32, 64}).to(dev);
    at::Tensor wt = torch::randn({64, 48}).to(dev).requires_grad_();
    at::relu(at::mm(x, wt)).sum().backward();
  }
  ASSERT_TRUE(d.stop().isOk()) << d.status().message();
  const DumperCounters counters = d.counters();
  d.attach(nullptr);
  ASSERT_TRUE((*w)->flush().isOk());

  // By op name, then task id (`...{op_name}.{task_id}.{stream_id}.{timestamp}`): an op's file
  // of step s is its s-th.
  std::map<std::string, std::map<uint64_t, DecodedDumpFile>> files;
  for (const auto& e : fs::directory_iterator(d.dumpDirectory())) {
    auto f = readDumpFile(e.path().string());
    ASSERT_TRUE(f.isOk()) << f.status().message();
    std::string name = e.path().filename().string();
    for (int i = 0; i < 2; ++i) name.erase(name.rfind('.'));
    files[f->op_name][std::stoull(name.substr(name.rfind('.') + 1))] = std::move(*f);
  }
  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto rows = (*r)->tensorDumps(1);
  ASSERT_TRUE(rows.isOk());
  ASSERT_FALSE(rows->empty());
  uint64_t shared_bytes = 0;
  std::set<int64_t> ids;
  for (const TensorDumpInfo& row : *rows) {
    SCOPED_TRACE(row.op_name + " " + row.io + " " + std::to_string(row.idx));
    ids.insert(row.id);
    ASSERT_EQ(files[row.op_name].size(), 2u);
    const DecodedDumpFile& f = std::next(files[row.op_name].begin(), row.step)->second;
    const auto& list = row.io == "input" ? f.inputs : f.outputs;
    ASSERT_LT(static_cast<size_t>(row.idx), list.size());
    auto stored = (*r)->tensorDumpData(row.id);
    ASSERT_TRUE(stored.isOk());
    auto raw = tensor::decodeDumpPayload(stored->bytes, stored->zstd_frame);
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(*raw, list[row.idx].data);
    if (row.data_ref >= 0) {
      EXPECT_TRUE(ids.count(row.data_ref)) << "refers to a later row";
      shared_bytes += raw->size();
    }
  }
  EXPECT_GT(shared_bytes, 2u * 32 * 48 * 4) << "relu's input, in both steps";
  EXPECT_EQ(counters.shared_payload_bytes, shared_bytes);
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

// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

uint64_t bytesOfFiles(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

TEST(DumperTest, SizingPassCountsWhatAStepWritesAndWritesNothing) {
  const fs::path dir = tempDir("sizing");
  DumpConfig c = withFiles(dir);
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(c).isOk());
  ASSERT_TRUE(d.beginSizing().isOk());
  EXPECT_FALSE(d.start().isOk()) << "not while sizing";
  step(0);
  const DumpSizeEstimate size = d.endSizing();
  EXPECT_EQ(npu::op_observer(), nullptr);
  EXPECT_TRUE(fs::is_empty(c.dump_path)) << "a sizing pass writes no file or directory";
  ASSERT_GT(size.ops, 5u);

  // The same step dumped for real: the estimate is what it wrote.
  runDumped(c, 1, nullptr);
  const DumperCounters real = d.counters();
  EXPECT_EQ(size.ops, real.ops_dumped);
  EXPECT_EQ(size.tensors, real.tensors);
  EXPECT_EQ(size.payload_bytes, real.payload_bytes);
  EXPECT_EQ(size.file_bytes, bytesOfFiles(c.dump_path));
  EXPECT_GE(size.trace_bytes, size.payload_bytes) << "rows carry the payloads too";

  c.data = DumpDataKind::kOverflow;
  ASSERT_TRUE(d.configure(c).isOk());
  EXPECT_FALSE(d.beginSizing().isOk()) << "overflow mode has nothing to size";
  fs::remove_all(dir);
}

TEST(DumperTest, FreeSpaceRefusalNamesPathBytesStepsAndFreeSpace) {
  const fs::path dir = tempDir("space");
  DumpConfig c = withFiles(dir);
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(c).isOk());
  DumpSizeEstimate size;
  size.ops = 10;
  size.tensors = 30;
  size.payload_bytes = 900;
  size.file_bytes = 1000;
  size.trace_bytes = 1200;
  {
    ScopedEnv free("NPUSCOPE_FAKE_FREE_BYTES", "2999");
    const Status s = d.checkFreeSpace(size, 3, "");
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    for (const char* part : {"dump.dump_path", "has 2.93 KiB (2999 bytes) free",
                             "3 dumped steps need 2.93 KiB (3000 bytes)", "1000 bytes per step", "force"}) {
      EXPECT_NE(s.message().find(part), std::string::npos) << part << " in: " << s.message();
    }
    EXPECT_NE(s.message().find(c.dump_path), std::string::npos) << s.message();
    EXPECT_TRUE(d.checkFreeSpace(size, 2, "").isOk());
    EXPECT_TRUE(d.checkFreeSpace(size, 0, "").isOk()) << "no dumped step, nothing needed";
  }
  {
    // The trace file on the same filesystem: its rows add up with the files.
    ScopedEnv free("NPUSCOPE_FAKE_FREE_BYTES", "6000");
    EXPECT_TRUE(d.checkFreeSpace(size, 3, "").isOk());
    const Status s = d.checkFreeSpace(size, 3, (dir / "trace.db").string());
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("(6600 bytes), 2.15 KiB (2200 bytes) per step"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(dir.string()), std::string::npos) << s.message();
  }
  {
    ScopedEnv free("NPUSCOPE_FAKE_FREE_BYTES", "10");
    c.force = true;
    ASSERT_TRUE(d.configure(c).isOk());
    EXPECT_TRUE(d.checkFreeSpace(size, 3, "").isOk()) << "forced";
  }
  fs::remove_all(dir);
}

TEST(DumperTest, UpdatePhaseIsLeftOutUnlessAskedAndNamedApart) {
  const fs::path dir = tempDir("update");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  auto names = [&](bool dump_update) {
    const int64_t run = *(*w)->beginRun(RunInfo{});
    DumpConfig c;
    c.data = DumpDataKind::kStats;
    c.dump_update = dump_update;
    Dumper& d = Dumper::instance();
    EXPECT_TRUE(d.configure(c).isOk());
    d.attach(w->get());
    EXPECT_TRUE(d.start().isOk());
    d.setStep(0);
    const auto dev = npu::device(0);
    at::Tensor w0 = torch::randn({4, 3}).to(dev).requires_grad_();
    at::relu(at::mm(torch::randn({2, 4}).to(dev), w0)).sum().backward();
    {
      Dumper::UpdatePhase update;  // an SGD step by hand
      torch::NoGradGuard no_grad;
      w0.sub_(w0.grad() * 0.1);
    }
    at::Tensor after = at::relu(w0);  // forward again after the update
    EXPECT_TRUE(d.stop().isOk());
    EXPECT_TRUE((*w)->endRun("completed").isOk());
    auto r = TraceReader::open(db);
    auto rows = (*r)->tensorDumps(run);
    std::set<std::string> out;
    for (const auto& row : *rows) out.insert(row.op_name);
    return out;
  };
  const std::set<std::string> plain = names(false), with_update = names(true);
  EXPECT_TRUE(plain.count("mm.0.forward") && plain.count("mm.0.backward"));
  EXPECT_TRUE(plain.count("relu.1.forward")) << "numbering of forward ops is unaffected by the update";
  for (const auto& n : plain) {
    EXPECT_EQ(n.find(".update"), std::string::npos) << n;
    EXPECT_NE(n.rfind("sub_.", 0), 0u) << n << ": an update op labelled forward";
    EXPECT_NE(n.rfind("mul.", 0), 0u) << n << ": an update op labelled forward";
  }
  EXPECT_TRUE(with_update.count("mul.0.update") && with_update.count("sub_.0.update"));
  EXPECT_TRUE(with_update.count("relu.1.forward"));
  std::set<std::string> forward_with, forward_plain;
  for (const auto& n : with_update)
    if (n.find(".update") == std::string::npos) forward_with.insert(n);
  EXPECT_EQ(forward_with, plain) << "forward and backward names are the same with or without the update";
  fs::remove_all(dir);
}

TEST(DumperTest, DumpPathRemovedMidRunStopsDumpingOnceTrainingGoesOn) {
  const fs::path dir = tempDir("vanish");
  const std::string db = (dir / "trace.db").string();
  auto w = TraceWriter::open(db);
  ASSERT_TRUE(w.isOk());
  const int64_t run = *(*w)->beginRun(RunInfo{});
  DumpConfig c = withFiles(dir);
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(c).isOk());
  d.attach(w->get());
  ASSERT_TRUE(d.start().isOk());
  testing::internal::CaptureStderr();
  d.setStep(0);
  step(0);
  ASSERT_TRUE(d.flush().isOk());  // step 0 on disk before the directory goes away
  const uint64_t files_before = d.counters().files;
  ASSERT_GT(files_before, 5u);
  fs::remove_all(c.dump_path);
  for (int s = 1; s < 4; ++s) {
    d.setStep(s);
    step(s);  // training goes on
  }
  const Status stopped = d.stop();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(stopped.isOk());
  EXPECT_EQ(stopped.code(), StatusCode::kIoError);
  EXPECT_NE(stopped.message().find(c.dump_path), std::string::npos) << stopped.message();
  EXPECT_EQ(d.counters().files, files_before) << "no file after the directory vanished";
  size_t messages = 0;
  for (size_t at = err.find("dump stopped"); at != std::string::npos; at = err.find("dump stopped", at + 1)) ++messages;
  EXPECT_EQ(messages, 1u) << err;
  ASSERT_TRUE((*w)->endRun("completed").isOk());
  // The trace file is consistent and holds the rows of step 0 only, one per tensor of a file.
  auto r = TraceReader::open(db);
  ASSERT_TRUE(r.isOk());
  auto rows = (*r)->tensorDumps(run);
  ASSERT_TRUE(rows.isOk());
  std::set<std::string> ops;
  for (const auto& row : *rows) {
    EXPECT_EQ(row.step, 0);
    ops.insert(row.op_name);
  }
  EXPECT_EQ(ops.size(), files_before);
  fs::remove_all(dir);
}

TEST(DumperTest, FileSizeLimitStopsDumpingTrainingGoesOn) {
  // A full disk, as a process sees it through the file-size limit: writes fail part way.
  const fs::path dir = tempDir("full");
  DumpConfig c = withFiles(dir);
  Dumper& d = Dumper::instance();
  ASSERT_TRUE(d.configure(c).isOk());
  d.attach(nullptr);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 16 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  ASSERT_TRUE(d.start().isOk());
  testing::internal::CaptureStderr();
  const auto dev = npu::device(0);
  at::Tensor x = torch::ones({64, 64}).to(dev);  // 16 KiB per tensor: the file cannot hold it
  for (int s = 0; s < 3; ++s) {
    d.setStep(s);
    x = at::relu(x + 1);
  }
  const Status stopped = d.stop();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(stopped.isOk());
  EXPECT_NE(stopped.message().find("File too large"), std::string::npos) << stopped.message();
  EXPECT_NE(err.find("training goes on"), std::string::npos) << err;
  EXPECT_FLOAT_EQ(x.cpu()[0][0].item<float>(), 4.0f) << "the ops themselves ran";
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
