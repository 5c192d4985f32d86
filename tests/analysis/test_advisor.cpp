// The advisor's rules: each on a written run that triggers it, with the figures it must report
// worked out here, and on a clean run that must not.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "npuscope/analysis/advisor.h"
#include "npuscope/analysis/memory_breakdown.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"

// The runs below list ops as {name, shapes, duration} and leave the other members at their
// defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace npuscope {
namespace {

struct Op {
  std::string name;
  std::string shapes;
  int64_t dur_ns;
  int32_t step = 0;
  std::string dtypes;  // recorded input dtypes ("float, float"); the op then ran on npu:0
  int children = 0;    // ops nested inside it (aten::add_, back to back)
  int64_t device_dur_ns = -1;  // modeled device duration (a kernel on npu:0)
};

struct Step {
  int64_t dur_ns;
  double scale;
  bool skipped = false;
};

// One run: `ops` back to back on one thread (top level), `steps` back to back from t = 0, and
// one memory sample of `reserved` bytes on npu:0.
std::string writeRun(const std::string& name, const std::vector<Op>& ops, const std::vector<Step>& steps,
                     int64_t reserved = int64_t{1} << 30, const std::string& opt_level = "O1") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("npuscope_advisor_" + name + "_" + std::to_string(::getpid()) + ".db"))
                               .string();
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w.isOk());
  RunInfo info;
  info.started_ns = 0;
  info.model = name;
  info.opt_level = opt_level;
  EXPECT_TRUE((*w)->beginRun(info).isOk());
  auto buf = (*w)->takeBuffer();
  int64_t t = 0, id = 1;
  for (const Op& o : ops) {
    OpRecord r;
    r.id = id++;
    r.start_ns = t;
    r.dur_ns = o.dur_ns;
    r.thread_id = 1;
    r.step = o.step;
    r.name_id = StringTable::global().intern(o.name);
    r.shapes_id = o.shapes.empty() ? 0 : StringTable::global().intern(o.shapes);
    r.dtypes_id = o.dtypes.empty() ? 0 : StringTable::global().intern(o.dtypes);
    r.device = o.dtypes.empty() ? -1 : 0;
    r.device_dur_ns = o.device_dur_ns;
    auto put = [&](const OpRecord& x) {
      buf->records[buf->size++] = x;
      if (buf->size == OpBuffer::kCapacity) {
        EXPECT_TRUE((*w)->submit(buf));
        buf = (*w)->takeBuffer();
      }
    };
    put(r);
    for (int c = 0; c < o.children; ++c) {
      OpRecord k;
      k.id = id++;
      k.parent_id = r.id;
      k.depth = 1;
      k.dur_ns = o.dur_ns / (2 * o.children);
      k.start_ns = t + 1 + c * 2 * k.dur_ns;
      k.thread_id = 1;
      k.step = o.step;
      k.name_id = StringTable::global().intern("aten::add_");
      put(k);
    }
    t += o.dur_ns + 10;
  }
  if (buf->size) {
    EXPECT_TRUE((*w)->submit(buf));
  }
  int64_t st = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    StepRecord s;
    s.step = static_cast<int64_t>(i);
    s.start_ns = st;
    s.dur_ns = steps[i].dur_ns;
    s.loss_scale = steps[i].scale;
    s.overflow = s.skipped = steps[i].skipped;
    (*w)->addStep(s);
    st += steps[i].dur_ns;
  }
  MemoryRecord m;
  m.ts_ns = 5;
  m.allocated = static_cast<uint64_t>(reserved / 2);
  m.reserved = static_cast<uint64_t>(reserved);
  (*w)->addMemory(m);
  EXPECT_TRUE((*w)->endRun("completed").isOk());
  return path;
}

std::vector<Finding> adviseFile(const std::string& path, const AdvisorOptions& o = {}) {
  auto r = TraceReader::open(path);
  EXPECT_TRUE(r.isOk());
  auto f = advise(**r, 1, o);
  EXPECT_TRUE(f.isOk()) << f.status().message();
  return f.isOk() ? *f : std::vector<Finding>{};
}

const Finding* find(const std::vector<Finding>& f, const std::string& rule) {
  for (const Finding& x : f) {
    if (x.rule == rule) return &x;
  }
  return nullptr;
}

std::vector<Step> steadySteps(int n) {
  std::vector<Step> s;
  for (int i = 0; i < n; ++i) s.push_back({1000000, 65536.0});
  return s;
}

// A clean run: native ops, fixed shapes, few casts, no skipped steps, a steady scale, 1 GiB.
TEST(Advisor, ACleanRunHasNoFindings) {
  std::vector<Op> ops;
  for (int i = 0; i < 20; ++i) {
    ops.push_back({"aten::convolution", "[[8, 3, 32, 32], [16, 3, 3, 3]]", 50000});
    ops.push_back({"aten::relu", "[[8, 16, 30, 30]]", 5000});
    ops.push_back({"aten::to", "[[8, 3, 32, 32]]", 1000});
  }
  const auto f = adviseFile(writeRun("clean", ops, steadySteps(10)));
  for (const Finding& x : f) ADD_FAILURE() << x.rule << ": " << x.title;
}

// torch_npu 2.0.1 lists aten::_fft_r2c as tocpu (fallback) and aten::linalg_matrix_exp not at all
// (no_kernel): analysis/data/torch_npu_ops_v2.0.1-5.0.0.txt.
TEST(Advisor, OpsARealDeviceWouldNotRunNatively) {
  std::vector<Op> ops = {{"aten::relu", "", 1000}, {"aten::_fft_r2c", "", 3000}, {"aten::_fft_r2c", "", 4000}};
  const auto f = adviseFile(writeRun("fallback", ops, steadySteps(2)));
  const Finding* x = find(f, "not_native_ops");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->severity, Severity::kWarning);
  EXPECT_EQ(x->ops, std::vector<std::string>{"aten::_fft_r2c"});
  EXPECT_NE(x->evidence.find("2 calls, 0.007 ms"), std::string::npos) << x->evidence;
  ops.push_back({"aten::linalg_matrix_exp", "", 1000});
  const auto g = adviseFile(writeRun("fails", ops, steadySteps(2)));
  ASSERT_NE(find(g, "not_native_ops"), nullptr);
  EXPECT_EQ(find(g, "not_native_ops")->severity, Severity::kCritical);
  EXPECT_EQ(g.front().rule, "not_native_ops") << "most severe first";
}

// New shapes in step after step fire (matmul: a new one in each of steps 1-5); new shapes in only
// 3 steps (add) or many shapes repeated every step (per-parameter copies) do not.
TEST(Advisor, OpsTakingNewInputShapesAfterTheFirstStep) {
  std::vector<Op> ops;
  for (int32_t step = 0; step < 6; ++step) {
    for (int p = 0; p < 10; ++p) ops.push_back({"aten::copy_", "[[" + std::to_string(p + 1) + ", 3]]", 500, step});
    ops.push_back({"aten::matmul", "[[" + std::to_string(8 + step) + ", 64], [64, 64]]", 1000, step});  // 5 new
    ops.push_back({"aten::add", "[[" + std::to_string(8 + step % 4) + "], []]", 1000, step});          // 3 new
  }
  const auto f = adviseFile(writeRun("shapes", ops, steadySteps(6)));
  const Finding* x = find(f, "dynamic_shapes");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->ops, std::vector<std::string>{"aten::matmul"}) << "add: 3 new shapes, under 4; copy_: none new";
  EXPECT_NE(x->evidence.find("aten::matmul: new shapes in 5 steps (5 shapes)"), std::string::npos) << x->evidence;
}

TEST(Advisor, CastsAboveTheirShareOfOpTime) {
  // Self time: casts 30 us of 100 us = 30 %, above 2 x 10 %: a warning.
  const std::vector<Op> ops = {{"aten::mm", "", 70000}, {"aten::to", "", 20000}, {"aten::_to_copy", "", 10000}};
  const auto f = adviseFile(writeRun("casts", ops, steadySteps(2)));
  const Finding* x = find(f, "cast_overhead");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->severity, Severity::kWarning);
  EXPECT_NE(x->title.find("30.0 %"), std::string::npos) << x->title;
  AdvisorOptions o;
  o.cast_share_min = 0.31;
  EXPECT_EQ(find(adviseFile(writeRun("casts2", ops, steadySteps(2)), o), "cast_overhead"), nullptr);
}

TEST(Advisor, SkippedStepsAndTheirCost) {
  // 10 steps of 1 ms; steps 2 and 5 skipped: 2 ms of 10 lost = 20 %.
  std::vector<Step> steps = steadySteps(10);
  steps[2].skipped = steps[5].skipped = true;
  const auto f = adviseFile(writeRun("skipped", {{"aten::relu", "", 1000}}, steps));
  const Finding* x = find(f, "skipped_steps");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->steps, (std::vector<int64_t>{2, 5}));
  EXPECT_NE(x->title.find("2 of 10 steps"), std::string::npos) << x->title;
  EXPECT_NE(x->title.find("20.0 %"), std::string::npos) << x->title;
  EXPECT_EQ(x->severity, Severity::kWarning);
}

TEST(Advisor, LossScaleCollapseAndOscillation) {
  std::vector<Step> collapse;
  double s = 4.0;
  for (int i = 0; i < 6; ++i, s /= 2) collapse.push_back({1000000, s, true});  // 4 .. 0.125
  const auto fc = adviseFile(writeRun("collapse", {{"aten::relu", "", 1000}}, collapse));
  const Finding* x = find(fc, "loss_scale");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->severity, Severity::kCritical);
  EXPECT_NE(x->title.find("collapsed to 0.125"), std::string::npos) << x->title;

  std::vector<Step> osc;
  for (int i = 0; i < 10; ++i) osc.push_back({1000000, i % 2 ? 32768.0 : 65536.0});  // 5 backoffs, 4 growths
  const auto fo = adviseFile(writeRun("oscillate", {{"aten::relu", "", 1000}}, osc));
  const Finding* y = find(fo, "loss_scale");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->severity, Severity::kWarning);
  EXPECT_NE(y->title.find("5 backoffs and 4 growths"), std::string::npos) << y->title;
  EXPECT_EQ(y->steps.size(), 5u);
}

// Under O1 a linear whose inputs are all fp32 escaped the cast: 3 of 4 Cube calls, 300 of 310
// µs; the same ops in fp16, or the same run at O0, or without recorded dtypes, are no finding.
TEST(Advisor, Fp32MatmulsAndConvolutionsUnderO1) {
  std::vector<Op> ops;
  for (int i = 0; i < 3; ++i) ops.push_back({"aten::linear", "[[64, 512], [512, 512], [512]]", 100000, 0, "float, float, float"});
  ops.push_back({"aten::convolution", "[[8, 3, 32, 32], [16, 3, 3, 3]]", 10000, 0, "c10::Half, c10::Half"});
  const auto f = adviseFile(writeRun("fp32cube", ops, {{10000000, 65536.0}}));
  const Finding* x = find(f, "fp32_cube");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->title, "3 of 4 matmuls/convolutions run in fp32 under O1 (96.8 % of their time)");
  EXPECT_EQ(x->severity, Severity::kWarning);
  EXPECT_NE(x->evidence.find("0.300 ms of 0.310 ms in fp32: aten::linear [[64, 512], [512, 512], [512]] x3"),
            std::string::npos) << x->evidence;
  EXPECT_EQ(x->ops, std::vector<std::string>{"aten::linear"});
  EXPECT_EQ(find(adviseFile(writeRun("fp32cube_o0", ops, {{10000000, 65536.0}}, int64_t{1} << 30, "O0")), "fp32_cube"),
            nullptr);
  for (Op& o : ops) o.dtypes = o.dtypes.empty() ? "" : "c10::Half, c10::Half, c10::Half";
  EXPECT_EQ(find(adviseFile(writeRun("fp16cube", ops, {{10000000, 65536.0}})), "fp32_cube"), nullptr);
  for (Op& o : ops) o.dtypes.clear();
  EXPECT_EQ(find(adviseFile(writeRun("nodtypes", ops, {{10000000, 65536.0}})), "fp32_cube"), nullptr);
}

// torch.optim's Adam marks its step; 64 per-parameter ops inside it is an unfused optimizer, 8 is
// not, and a fused one's mark is never reported.
TEST(Advisor, UnfusedOptimizerRunsManyOpsPerStep) {
  const std::vector<Step> one = {{10000000, 65536.0}};
  const auto f = adviseFile(writeRun("unfused", {{"aten::relu", "", 1000}, {"Optimizer.step#Adam.step", "", 640000, 0, "", 64}}, one));
  const Finding* x = find(f, "unfused_optimizer");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->title, "Optimizer.step#Adam.step runs 64 ops per step (an unfused optimizer)");
  EXPECT_NE(x->evidence.find("64 ops in 0.640 ms, 0.010 ms per op"), std::string::npos) << x->evidence;
  EXPECT_NE(x->suggestion.find("NpuFusedAdam"), std::string::npos);
  EXPECT_NE(x->suggestion.find("--optimizer adam"), std::string::npos);
  EXPECT_EQ(find(adviseFile(writeRun("few", {{"Optimizer.step#Adam.step", "", 80000, 0, "", 8}}, one)), "unfused_optimizer"),
            nullptr);
  EXPECT_EQ(find(adviseFile(writeRun("fused", {{"Optimizer.step#NpuFusedAdam.step", "", 640000, 0, "", 64}}, one)),
                 "unfused_optimizer"),
            nullptr);
}

TEST(Advisor, MemoryNearTheDevicesCapacity) {
  const int64_t gib = int64_t{1} << 30;
  const auto fm = adviseFile(writeRun("memory", {{"aten::relu", "", 1000}}, steadySteps(2), 30 * gib));
  const Finding* x = find(fm, "memory_capacity");
  ASSERT_NE(x, nullptr);  // 30 of 32 GiB: 93.8 %
  EXPECT_NE(x->title.find("93.8 %"), std::string::npos) << x->title;
  EXPECT_EQ(x->severity, Severity::kWarning);
  EXPECT_EQ(find(adviseFile(writeRun("memory2", {{"aten::relu", "", 1000}}, steadySteps(2), 28 * gib)),
                 "memory_capacity"),
            nullptr);  // 87.5 %
}

}  // namespace
}  // namespace npuscope

namespace npuscope {
namespace {

// Host-bound by the predicted timeline (analysis/predicted_timeline.h, default parameters): 100
// back-to-back 2 us kernels. Per op the host dispatches 10 us and enqueues 1.5 us; the launch
// thread adds 8 us, so op i runs at 11.5 (i + 1) + 8 us: the step ends at 1160 us with the
// device busy 200 us, idle 960 / 1160 = 82.8 %. Twice the work per kernel ends at 1162 us:
// 2 x 1160 / 1162 = 2.00x the samples/s. Without the task queue each op costs the host 18 us:
// 100 x 18 = 1800 us, plus the last kernel's 2 us.
TEST(Advisor, HostBoundByThePredictedTimeline) {
  std::vector<Op> tiny;
  for (int i = 0; i < 100; ++i) tiny.push_back({"aten::add", "", 30000, 1, "float, float", 0, 2000});
  const auto f = adviseFile(writeRun("hostbound", tiny, steadySteps(3)));
  const Finding* x = find(f, "host_bound");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->severity, Severity::kCritical);
  EXPECT_EQ(x->title, "host-bound: a real npu would idle 82.8 % of each step waiting for the host");
  EXPECT_NE(x->evidence.find("predicted step 1: 1.160ms"), std::string::npos) << x->evidence;
  EXPECT_NE(x->suggestion.find("1.162ms per step, 2.00x the samples/s"), std::string::npos) << x->suggestion;
  EXPECT_NE(x->suggestion.find("without the task queue the step is 1.802ms"), std::string::npos) << x->suggestion;
  EXPECT_EQ(x->steps, std::vector<int64_t>{1});

  // Ten 5 ms matmuls keep the device busy: no finding.
  std::vector<Op> big;
  for (int i = 0; i < 10; ++i) big.push_back({"aten::mm", "", 30000, 1, "float, float", 0, 5000000});
  EXPECT_EQ(find(adviseFile(writeRun("devicebound", big, steadySteps(3))), "host_bound"), nullptr);
}

}  // namespace
}  // namespace npuscope

namespace npuscope {
namespace {

// Memory by owner: fp32 masters and Adam state of 300 MiB each live all run, a 100 MiB
// activation in step 0, and a 2 MiB block kept from every step (a leak); the pool reserved
// 2 GiB at the peak. Peak: masters + state + the first kept block + the activation = 702 MiB,
// of which masters and state are 600 / 702 = 85.5 %; free at the peak: 2048 - 702 = 1346 MiB,
// 65.7 % of the reserved bytes. Step k begins with 600 + 2 k MiB (its own block comes 100 us in).
TEST(Advisor, MemoryRulesReadTheBlocksOwners) {
  const int64_t mib = int64_t{1} << 20, ms = 1000000;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("npuscope_advisor_owners_" + std::to_string(::getpid()) + ".db")).string();
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w.isOk());
    RunInfo info;
    info.model = "owners";
    ASSERT_TRUE((*w)->beginRun(info).isOk());
    for (int k = 0; k < 8; ++k) {
      StepRecord s;
      s.step = k;
      s.start_ns = k * ms;
      s.dur_ns = ms;
      (*w)->addStep(s);
    }
    auto block = [](int64_t seq, int64_t ns, int64_t size, MemoryCategory c, int64_t step) {
      MemoryBlockRecord b;
      b.alloc_seq = seq;
      b.alloc_ns = ns;
      b.size = b.requested = size;
      b.category = static_cast<uint8_t>(c);
      b.step = step;
      return b;
    };
    std::vector<MemoryBlockRecord> blocks = {
        block(1, 0, 300 * mib, MemoryCategory::kMasterWeight, -1),
        block(2, 0, 300 * mib, MemoryCategory::kOptimizerState, -1),
        block(3, ms / 10, 2 * mib, MemoryCategory::kOther, 0),
        block(4, ms / 2, 100 * mib, MemoryCategory::kActivation, 0)};
    blocks.back().free_seq = 5;
    blocks.back().free_ns = 9 * ms / 10;
    for (int k = 1; k < 8; ++k) blocks.push_back(block(5 + k, k * ms + ms / 10, 2 * mib, MemoryCategory::kOther, k));
    (*w)->addMemoryBlocks(std::move(blocks));
    MemoryDeviceRecord d;
    d.start_seq = 0;
    d.end_seq = 12;
    d.peak_seq = 4;
    d.peak_ns = ms / 2;
    d.peak_allocated = 702 * mib;
    d.peak_reserved = 2048 * mib;
    d.largest_cached = 512 * mib;
    d.capacity = 32768 * mib;
    (*w)->addMemoryDevice(d);
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  const auto f = adviseFile(path);
  const Finding* state = find(f, "memory_model_state");
  ASSERT_NE(state, nullptr);
  EXPECT_NE(state->title.find("85.5 %"), std::string::npos) << state->title;
  EXPECT_NE(state->evidence.find("master_weight 300.00 MiB (43%)"), std::string::npos) << state->evidence;
  EXPECT_EQ(find(f, "memory_activations"), nullptr);  // 100 of 702 MiB
  const Finding* frag = find(f, "memory_fragmentation");
  ASSERT_NE(frag, nullptr);
  EXPECT_NE(frag->title.find("65.7 %"), std::string::npos) << frag->title;
  EXPECT_NE(frag->evidence.find("largest free cached block 512.00 MiB"), std::string::npos) << frag->evidence;
  const Finding* leak = find(f, "memory_leak");
  ASSERT_NE(leak, nullptr);
  EXPECT_NE(leak->evidence.find("step 2 began with 604.00 MiB, step 7 with 614.00 MiB"), std::string::npos)
      << leak->evidence;

  // With a lower bar the activation's share shows: 100 / 702 = 14.2 %.
  AdvisorOptions o;
  o.memory_activation_share_min = 0.1;
  const auto lower_bar = adviseFile(path, o);
  const Finding* act = find(lower_bar, "memory_activations");
  ASSERT_NE(act, nullptr);
  EXPECT_NE(act->title.find("14.2 %"), std::string::npos) << act->title;
  // The live set and the replayed peak agree with the recorder's.
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.isOk());
  auto blocks = (*reader)->memoryBlocks(1);
  ASSERT_TRUE(blocks.isOk());
  EXPECT_EQ(blocks->size(), 11u);
  const LiveSet peak = liveAtSeq(*blocks, 0, 4);
  EXPECT_EQ(peak.allocated, 702 * mib);
  EXPECT_EQ(sweepPeak(*blocks, 0, INT64_MIN, INT64_MAX).seq, 4);
}

}  // namespace
}  // namespace npuscope
