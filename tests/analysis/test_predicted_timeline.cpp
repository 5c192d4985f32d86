// The predicted host/device timeline against timelines worked out by hand: a few ops with known
// costs, with and without the task queue, with a synchronisation, a host fallback, autograd
// nodes, the emulator's own work inside kernels; then a written run read back through
// TraceReader (the recorded host_sync column) and the prediction's independence of measured
// times.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "npuscope/analysis/predicted_timeline.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope {
namespace {

// Small round numbers so every expected time below can be added up by hand.
HostModelParams params(bool task_queue) {
  HostModelParams p;
  p.dispatch_ns = 10;
  p.composite_ns = 2;
  p.autograd_node_ns = 3;
  p.launch_ns = 8;
  p.enqueue_ns = 1;
  p.sync_ns = 15;
  p.task_queue = task_queue;
  return p;
}

struct Builder {
  std::vector<PredictedInput> ops;
  int64_t next_id = 1, t = 0;
  // An op starting after the previous one (measured times only order the ops).
  int64_t add(std::string_view name, int32_t device, int64_t device_dur, int64_t parent = -1, bool sync = false) {
    PredictedInput in;
    in.id = next_id++;
    in.parent_id = parent;
    in.start_ns = t += 1000;
    in.device = device;
    in.device_dur_ns = device_dur;
    in.host_sync = sync;
    in.name = name;
    ops.push_back(in);
    return in.id;
  }
};

const PredictedOp* find(const std::vector<PredictedOp>& out, int64_t id) {
  for (const PredictedOp& o : out)
    if (o.id == id) return &o;
  return nullptr;
}

// A DDP-like step on 2 ranks: a backward kernel, the gradient all-reduce, another backward
// kernel (overlapping the all-reduce), then the optimizer's kernel (waiting for it).
TEST(PredictedTimeline, CollectivesRunOnTheCommunicationStream) {
  HostModelParams p = params(false);
  p.comm_ranks = 2;
  p.link_bytes_per_s = 1e9;  // 1 byte per ns
  p.comm_phase_ns = 60;
  Builder b;
  b.add("aten::mm", 0, 100);
  b.ops.back().backward = true;
  const int64_t ar = b.add("hcom_allReduce_", 0, -1);
  b.ops.back().bytes = 1000;  // two phases of 60 + 1000 / 2 ns
  const int64_t k2 = b.add("aten::mm", 0, 50);
  b.ops.back().backward = true;
  const int64_t k3 = b.add("aten::add_", 0, 20);  // the optimizer: outside backward
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(3, b.ops, p, &out);
  // host: mm 10+8 (launched at 18, runs 18..118); all-reduce 10+8 (36; starts after the kernels
  // before it, 118..1238); mm 10+8 (54; 118..168, beside the all-reduce); add_ 10+8 (72; waits
  // for the all-reduce: 1238..1258).
  EXPECT_EQ(find(out, ar)->role, PredictedRole::kCollective);
  EXPECT_EQ(find(out, ar)->device_start_ns, 118);
  EXPECT_EQ(find(out, ar)->device_dur_ns, 1120);
  EXPECT_EQ(find(out, k2)->device_start_ns, 118);
  EXPECT_EQ(find(out, k3)->device_start_ns, 1238);
  EXPECT_EQ(s.step_ns, 1258);
  EXPECT_EQ(s.collectives, 1);
  EXPECT_EQ(s.comm_ns, 1120);
  EXPECT_EQ(s.comm_wait_ns, 1238 - 168);
  EXPECT_EQ(s.kernels, 3);
  EXPECT_EQ(s.device_busy_ns, 170);
  EXPECT_NE(describePredictedStep(s).find("1 collective takes"), std::string::npos);

  // One rank: nothing to move, the phase delay only.
  EXPECT_EQ(collectiveDurationNs("hcom_allReduce_", 1000, params(false)), HostModelParams().comm_phase_ns);
}

TEST(PredictedTimeline, CollectiveModelAgainstTheRealSample) {
  // tests/data/traces/ascend_alexnet_rank0_ascend_pt: the 8-rank job's third all-reduce,
  // hcom_allReduce__586_2_1, 151,011,328 bytes, took 2,402,388 ns on the real 910B server
  // (trace_view.json's HCCL lane; its peers were ready, unlike the first one's 79 ms).
  HostModelParams p;
  p.comm_ranks = 8;
  const double ratio = static_cast<double>(collectiveDurationNs("hcom_allReduce_", 151011328, p)) / 2402388.0;
  EXPECT_GT(ratio, 0.8);
  EXPECT_LT(ratio, 1.25);  // 2 x (60 us + 151 MB / 8 / 18.3 GB/s) = 2.18 ms: 0.91
}

TEST(PredictedTimeline, InputBytesFromRecordedShapes) {
  EXPECT_EQ(inputBytes("[[256, 4], []]", "float, Scalar"), 256 * 4 * 4);
  EXPECT_EQ(inputBytes("[[2, 3], [5]]", "c10::Half, long int"), 2 * 3 * 2 + 5 * 8);
  EXPECT_EQ(inputBytes("[[]]", "float"), 4);  // a 0-d tensor
  EXPECT_EQ(inputBytes("", "float"), -1);
  EXPECT_EQ(inputBytes("[[99999999999999999]]", "float"), -1);  // absurd: not known
}

TEST(PredictedTimeline, KernelsWithoutTaskQueueLaunchOnTheHostThread) {
  Builder b;
  const int64_t a = b.add("aten::mm", 0, 100), bb = b.add("aten::add", 0, 5), c = b.add("aten::relu", 0, 50);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(3, b.ops, params(false), &out);
  // A: dispatch 0..10, launch ..18, device 18..118. B: 18..28..36, device waits for A: 118..123.
  // C: 36..46..54, device 123..173.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(find(out, a)->host_end_ns, 18);
  EXPECT_EQ(find(out, a)->device_start_ns, 18);
  EXPECT_EQ(find(out, bb)->host_start_ns, 18);
  EXPECT_EQ(find(out, bb)->device_start_ns, 118);
  EXPECT_EQ(find(out, c)->device_start_ns, 123);
  EXPECT_EQ(s.step, 3);
  EXPECT_EQ(s.host_ns, 54);
  EXPECT_EQ(s.step_ns, 173);
  EXPECT_EQ(s.device_busy_ns, 155);
  EXPECT_EQ(s.device_span_ns, 155);
  EXPECT_EQ(s.host_wait_ns, 0);
  EXPECT_EQ(s.kernels, 3);
  EXPECT_EQ(s.devices, 1);
  EXPECT_NEAR(s.deviceIdleShare(), 1 - 155.0 / 173, 1e-12);
  EXPECT_EQ(boundBy(s), BoundBy::kDevice);  // idle 10 %, 155 of device work against 54 of host work
}

// A corrupt file's device duration near INT64_MAX: the predicted stream end and device busy time
// clamp at the int64 range (the double-to-int64 rounding and the sums would otherwise overflow).
TEST(PredictedTimeline, AHugeDeviceDurationClampsAtTheInt64Range) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Builder b;
  const int64_t a = b.add("aten::mm", 0, kMax), c = b.add("aten::add", 0, 5);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  // A: dispatch 0..10, launch ..18, device from 18 for kMax. C waits for a stream that never drains.
  EXPECT_EQ(find(out, a)->device_start_ns, 18);
  EXPECT_EQ(find(out, a)->device_dur_ns, kMax);
  EXPECT_EQ(find(out, c)->device_start_ns, kMax);
  EXPECT_EQ(s.device_busy_ns, kMax);
  EXPECT_EQ(s.step_ns, kMax);
  EXPECT_EQ(s.kernels, 2);
}

TEST(PredictedTimeline, TaskQueueLaunchesOnASecondThread) {
  Builder b;
  b.add("aten::mm", 0, 100);
  b.add("aten::add", 0, 5);
  const int64_t c = b.add("aten::relu", 0, 50);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(true), &out);
  // A: 0..10 dispatch, enqueue ..11, launcher 11..19, device 19..119. B: 11..21..22, launcher
  // 22..30, device 119..124. C: 22..32..33, launcher 33..41, device 124..174.
  EXPECT_EQ(s.host_ns, 33);
  EXPECT_EQ(s.step_ns, 174);
  EXPECT_EQ(find(out, c)->host_start_ns, 22);
  EXPECT_EQ(find(out, c)->device_start_ns, 124);
}

TEST(PredictedTimeline, TheHostWaitsForTheDeviceAtASync) {
  Builder b;
  b.add("aten::mm", 0, 100);
  const int64_t item = b.add("aten::item", 0, -1);
  const int64_t lsd = b.add("aten::_local_scalar_dense", 0, 2, item);  // a sync by its name
  const int64_t cpu = b.add("aten::add", -1, -1);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  // mm 0..10..18, device 18..118. item enters at 18, +2 = 20; _local_scalar_dense 20..30,
  // launch ..38, device 118..120; the host waits 38..120 (82), sync 120..135. add 135..137.
  EXPECT_EQ(find(out, lsd)->device_start_ns, 118);
  EXPECT_EQ(find(out, lsd)->host_end_ns, 135);
  EXPECT_EQ(find(out, item)->host_end_ns, 135);
  EXPECT_EQ(find(out, cpu)->host_start_ns, 135);
  EXPECT_EQ(s.host_wait_ns, 82);
  EXPECT_EQ(s.syncs, 1);
  EXPECT_EQ(s.step_ns, 137);
  EXPECT_EQ(s.device_busy_ns, 102);
  EXPECT_NEAR(s.hostWaitShare(), 82.0 / 137, 1e-12);

  // The recorder's flag makes any op a sync (a copy to the host).
  Builder c;
  c.add("aten::mm", 0, 100);
  c.add("aten::_copy_from", 0, 4, -1, true);
  const PredictedStep t = predictStep(0, c.ops, params(false), nullptr);
  // mm 0..18 (device 18..118); copy 18..28..36, device 118..122, wait 36..122, sync ..137.
  EXPECT_EQ(t.host_wait_ns, 86);
  EXPECT_EQ(t.step_ns, 137);
}

TEST(PredictedTimeline, EmulatorWorkInsideAKernelAndViewsCostNoDeviceTime) {
  Builder b;
  const int64_t conv = b.add("aten::convolution_overrideable", 0, 50);
  b.add("aten::empty", -1, -1, conv);
  b.add("aten::mkldnn_convolution", -1, -1, conv);
  const int64_t view = b.add("aten::view", 0, 2000);  // the cost model charged it; no kernel
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  // conv 0..10..18, device 18..68; its children are left out; view 18..20.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(find(out, view)->role, PredictedRole::kHostOp);
  EXPECT_EQ(find(out, view)->device_start_ns, -1);
  EXPECT_EQ(s.kernels, 1);
  EXPECT_EQ(s.host_ns, 20);
  EXPECT_EQ(s.step_ns, 68);
}

TEST(PredictedTimeline, AHostFallbackWaitsForTheDeviceThenRunsOnTheHost) {
  Builder b;
  b.add("aten::mm", 0, 100);
  const int64_t fft = b.add("aten::_fft_r2c", 0, 40);  // on torch_npu's host fallback list
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  // mm 0..18, device 18..118; fft dispatch 18..28, waits ..118 (90), runs ..158.
  EXPECT_EQ(find(out, fft)->role, PredictedRole::kFallback);
  EXPECT_EQ(find(out, fft)->host_end_ns, 158);
  EXPECT_EQ(s.host_wait_ns, 90);
  EXPECT_EQ(s.step_ns, 158);
  EXPECT_EQ(s.kernels, 1);
}

TEST(PredictedTimeline, AutogradNodesAndUserScopes) {
  Builder b;
  const int64_t scope = b.add("Optimizer.step#SGD.step", -1, -1);
  const int64_t node = b.add("autograd::engine::evaluate_function: AddmmBackward0", -1, -1, scope);
  const int64_t body = b.add("AddmmBackward0", 0, -1, node);
  const int64_t acc = b.add("torch::autograd::AccumulateGrad", -1, -1, body);
  const int64_t mm = b.add("aten::mm", 0, 10, acc);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  // node 0..3; mm 3..13, launch ..21, device 21..31.
  EXPECT_EQ(find(out, scope)->role, PredictedRole::kFree);
  EXPECT_EQ(find(out, node)->role, PredictedRole::kAutograd);
  EXPECT_EQ(find(out, mm)->host_start_ns, 3);
  EXPECT_EQ(find(out, mm)->device_start_ns, 21);
  EXPECT_EQ(find(out, scope)->depth, 0);
  EXPECT_EQ(find(out, mm)->depth, 4);
  EXPECT_EQ(s.host_ns, 21);
  EXPECT_EQ(s.step_ns, 31);
  EXPECT_EQ(s.host_ops, 2);
}

TEST(PredictedTimeline, PlacerKeepsRecordedStartsUnlessTheLastStepStillRuns) {
  PredictedStepPlacer p;
  EXPECT_EQ(p.place(1000, 300), 1000);
  EXPECT_EQ(p.place(2000, 1500), 2000);  // 1300 < 2000: its recorded start
  EXPECT_EQ(p.place(3000, 100), 3500);   // the previous ran to 3500
}

TEST(PredictedTimeline, HostBoundAndDeviceBoundVerdicts) {
  Builder small;  // 50 tiny kernels: the host dispatches 18 per 1 of device work
  for (int i = 0; i < 50; ++i) small.add("aten::add", 0, 1);
  const PredictedStep h = predictStep(0, small.ops, params(false));
  EXPECT_EQ(boundBy(h), BoundBy::kHost);
  EXPECT_STREQ(boundByName(boundBy(h)), "host-bound");

  Builder big;  // one long kernel, then a sync
  big.add("aten::mm", 0, 1000);
  big.add("aten::_local_scalar_dense", 0, 1);
  const PredictedStep d = predictStep(0, big.ops, params(false));
  EXPECT_EQ(boundBy(d), BoundBy::kDevice);
  EXPECT_STREQ(boundByName(boundBy(d)), "device-bound");

  Builder even;  // the device idles 23 %, and the host has more work than it: balanced
  for (int i = 0; i < 10; ++i) even.add("aten::add", 0, 15);
  const PredictedStep e = predictStep(0, even.ops, params(false));
  // op i: host 18 i .. 18 (i + 1), kernel 18 (i + 1) .. + 15: step 195, busy 150 < 180 of host work.
  EXPECT_EQ(e.step_ns, 195);
  EXPECT_EQ(boundBy(e), BoundBy::kBalanced);
}

TEST(PredictedTimeline, TwoDevicesAndWhatIfScaling) {
  Builder b;
  b.add("aten::mm", 0, 100);
  b.add("aten::mm", 1, 100);
  const PredictedStep s = predictStep(0, b.ops, params(false));
  // mm on 0: 0..18, device 18..118; on 1: 18..36, device 36..136.
  EXPECT_EQ(s.devices, 2);
  EXPECT_EQ(s.step_ns, 136);
  EXPECT_EQ(s.device_busy_ns, 200);
  EXPECT_NEAR(s.deviceIdleShare(), 1 - 200.0 / (2 * 136), 1e-12);
  HostModelParams p = params(false);
  p.device_scale = 2;
  const PredictedStep t = predictStep(0, b.ops, p);
  EXPECT_EQ(t.device_busy_ns, 400);
  EXPECT_EQ(t.step_ns, 236);  // 36 + 200
}

TEST(PredictedTimeline, MeasuredTimesDoNotChangeThePrediction) {
  Builder b;
  const int64_t item = b.add("aten::item", 0, -1);
  b.add("aten::_local_scalar_dense", 0, 2, item);
  for (int i = 0; i < 20; ++i) b.add(i % 3 ? "aten::add" : "aten::view", 0, 30 + i);
  const PredictedStep a = predictStep(0, b.ops, params(true));
  std::vector<PredictedInput> slower = b.ops;
  for (size_t i = 0; i < slower.size(); ++i) slower[i].start_ns = 5000 + static_cast<int64_t>(i) * 777777;
  std::reverse(slower.begin(), slower.end());  // input order does not matter either
  const PredictedStep c = predictStep(0, slower, params(true));
  EXPECT_EQ(a.step_ns, c.step_ns);
  EXPECT_EQ(a.host_ns, c.host_ns);
  EXPECT_EQ(a.device_busy_ns, c.device_busy_ns);
  EXPECT_EQ(a.host_wait_ns, c.host_wait_ns);
}

TEST(PredictedTimeline, CorruptParentLinksEndTheWalk) {
  Builder b;
  const int64_t x = b.add("aten::add", 0, 5);
  b.ops[0].parent_id = x;  // its own parent
  b.add("aten::mul", 0, 5, 99);
  b.ops[1].parent_id = 3;  // parent of a parent that points back
  b.add("aten::sub", 0, 5, 2);
  std::vector<PredictedOp> out;
  const PredictedStep s = predictStep(0, b.ops, params(false), &out);
  EXPECT_LE(s.kernels, 3);
  EXPECT_LE(out.size(), 3u);
  // A device index no recorded run has is not a stream to allocate.
  Builder c;
  c.add("aten::add", 2000000000, 5);
  const PredictedStep t = predictStep(0, c.ops, params(false));
  EXPECT_EQ(t.kernels, 0);
  EXPECT_EQ(t.devices, 0);
}

// A run written with TraceWriter: the host_sync column round-trips, and predictRun gives each
// step what predictStep gives its ops.
TEST(PredictedTimeline, PredictsARecordedRunStepByStep) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("npuscope_predicted_" + std::to_string(::getpid()) + ".db")).string();
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    RunInfo info;
    info.model = "predicted";
    ASSERT_TRUE((*w)->beginRun(info).isOk());
    std::unique_ptr<OpBuffer> buf = (*w)->takeBuffer();
    int64_t id = 1;
    for (int32_t step = 0; step < 3; ++step) {
      for (int k = 0; k < 3; ++k) {
        OpRecord r;
        r.id = id++;
        r.start_ns = id * 100;
        r.dur_ns = 50;
        r.thread_id = 1;
        r.step = step;
        r.device = 0;
        r.device_dur_ns = 100 * (step + 1);
        r.device_start_ns = r.start_ns;
        r.name_id = StringTable::global().intern(k == 2 ? "aten::_copy_from" : "aten::mm");
        r.host_sync = k == 2 ? 1 : 0;
        buf->records[buf->size++] = r;
      }
      StepRecord sr;
      sr.step = step;
      sr.start_ns = step * 1000;
      sr.dur_ns = 900;
      (*w)->addStep(sr);
    }
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto run = (*r)->latestRun();
  ASSERT_TRUE(run.isOk());
  auto ops = (*r)->stepOps(run->id, StepRange{1, 1});
  ASSERT_TRUE(ops.isOk()) << ops.status().message();
  ASSERT_EQ(ops->size(), 3u);
  EXPECT_FALSE((*ops)[0].host_sync);
  EXPECT_TRUE((*ops)[2].host_sync);
  auto steps = predictRun(**r, run->id, params(false));
  ASSERT_TRUE(steps.isOk()) << steps.status().message();
  ASSERT_EQ(steps->size(), 3u);
  for (int32_t step = 0; step < 3; ++step) {
    // mm, mm, copy (sync): device 18..18+d, 18+d..18+2d, 18+2d..18+3d; the host waits and
    // syncs: step = 18 + 3d + 15.
    const int64_t d = 100 * (step + 1);
    EXPECT_EQ((*steps)[static_cast<size_t>(step)].step, step);
    EXPECT_EQ((*steps)[static_cast<size_t>(step)].step_ns, 18 + 3 * d + 15) << "step " << step;
    EXPECT_EQ((*steps)[static_cast<size_t>(step)].syncs, 1);
  }
  const PredictedSummary sum = summarizePrediction(*steps);
  EXPECT_EQ(sum.steps, 3);
  EXPECT_EQ(sum.median_step_ns, 18 + 600 + 15);
  EXPECT_EQ(sum.total_ns, 3 * 33 + 18 * 100);
  EXPECT_EQ(sum.device_busy_ns, 1800);
  r->reset();
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
}

}  // namespace
}  // namespace npuscope
