// Recording sessions on real training steps on the npu: what lands in the file.
#include <sqlite3.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <ATen/record_function.h>

#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "npuscope/store/database.h"
#include "npuscope/device/npu.h"
#include "npuscope/dumper/dumper.h"
#include "npuscope/profiler/session.h"

namespace npuscope::profiler {
namespace {

std::string tempPath(const std::string& name) {
  std::string p = testing::TempDir() + "/npuscope_prof_" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return p;
}

struct Db {
  explicit Db(const std::string& path) : db(openTraceDatabase(path, OpenMode::kReadOnly).value()) {}
  int64_t scalar(const std::string& sql) {
    auto st = prepare(db.get(), sql);
    EXPECT_TRUE(st.isOk()) << st.status().message();
    if (!st.isOk() || sqlite3_step(st->get()) != SQLITE_ROW) return -1;
    return sqlite3_column_int64(st->get(), 0);
  }
  std::vector<std::string> strings(const std::string& sql) {
    std::vector<std::string> out;
    auto st = prepare(db.get(), sql);
    EXPECT_TRUE(st.isOk()) << st.status().message();
    while (st.isOk() && sqlite3_step(st->get()) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st->get(), 0);
      out.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    return out;
  }
  ScopedDb db;
};

// A tiny model trained on npu for `steps` steps inside a session.
void trainSteps(RecordingSession& s, int steps, bool fp16_extra = false) {
  torch::manual_seed(0);
  torch::nn::Linear lin(8, 4);
  lin->to(npu::device(0));
  torch::optim::SGD opt(lin->parameters(), 0.1);
  for (int i = 0; i < steps; ++i) {
    at::Tensor x = at::randn({16, 8}).to(npu::device(0));
    {
      UserScope scope("train_step_body");
      opt.zero_grad();
      auto loss = lin->forward(x).pow(2).mean();
      loss.backward();
      opt.step();
      if (fp16_extra) {
        at::Tensor h = x.to(at::kHalf);
        at::mm(h, h.t());
      }
    }
    s.step(StepMetrics{1.0 + i, 1024.0, false, false, 0.1, -1});
  }
}

TEST(RecordingSession, RecordsAConsistentOpTreeWithBackward) {
  const std::string p = tempPath("tree.db");
  {
    RunInfo run;
    run.command = "test";
    run.model = "linear";
    auto s = RecordingSession::start({p, run, Schedule()});
    ASSERT_TRUE(s.isOk()) << s.status().message();
    trainSteps(**s, 3);
    ASSERT_TRUE((*s)->stop("completed").isOk());
    EXPECT_EQ((*s)->droppedRecords(), 0u);
  }
  Db db(p);
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops"), 50);
  // Every child starts and ends inside its parent, one level deeper, on the same thread.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM op_events c JOIN op_events p ON c.parent_id = p.id "
                      "WHERE c.depth <> p.depth + 1 OR c.start_ns < p.start_ns OR "
                      "c.start_ns + c.dur_ns > p.start_ns + p.dur_ns OR c.thread_id <> p.thread_id"),
            0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM op_events WHERE parent_id IS NOT NULL AND "
                      "parent_id NOT IN (SELECT id FROM op_events)"),
            0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops WHERE name='aten::addmm'"), 0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops WHERE is_backward=1 AND name LIKE '%Backward%'"), 0);
  // A backward node carries the sequence number of the forward op it differentiates.
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops b JOIN ops f ON b.seq_nr = f.seq_nr AND b.run_id = f.run_id "
                      "WHERE b.name = 'AddmmBackward0' AND f.name = 'aten::addmm' AND f.is_backward = 0"),
            0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='train_step_body'"), 3);
  EXPECT_EQ(db.scalar("SELECT count(DISTINCT step) FROM ops"), 3);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM steps"), 3);
  EXPECT_EQ(db.scalar("SELECT CAST(loss AS INTEGER) FROM steps WHERE step=2"), 3);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM runs WHERE status='completed'"), 1);
  // Shapes as PyTorch prints them; the npu named as users see it.
  auto shapes = db.strings("SELECT input_shapes FROM ops WHERE name='aten::addmm' LIMIT 1");
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0], "[[4], [16, 8], [8, 4], [], []]");
  EXPECT_EQ(db.strings("SELECT device FROM ops WHERE name='aten::addmm' LIMIT 1")[0], "npu:0");
}

TEST(RecordingSession, LeafNpuOpsGetModeledDeviceTimes) {
  const std::string p = tempPath("modeled.db");
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    trainSteps(**s, 2);
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  EXPECT_GT(db.scalar("SELECT count(*) FROM op_events WHERE device_dur_ns > 0"), 10);
  // Launched at the host op's end, never before.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM op_events WHERE device_start_ns < start_ns + dur_ns"), 0);
  // On one device's stream the modeled tasks do not overlap.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM op_events a JOIN op_events b ON a.device = b.device AND a.id < b.id "
                      "AND a.device_start_ns IS NOT NULL AND b.device_start_ns IS NOT NULL "
                      "AND a.device_start_ns < b.device_start_ns + b.device_dur_ns "
                      "AND b.device_start_ns < a.device_start_ns + a.device_dur_ns"),
            0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM memory WHERE device=0 AND allocated > 0"), 0);
}

// Without shapes (torch_npu.profiler's default record_shapes=False) the npu ops are still device
// ops with the modeled times a run with shapes gets: only the shape and dtype columns are empty.
TEST(RecordingSession, WithoutShapesNpuOpsKeepTheirDeviceTimes) {
  std::map<bool, std::string> files;
  for (bool shapes : {true, false}) {
    files[shapes] = tempPath(shapes ? "with_shapes.db" : "without_shapes.db");
    SessionOptions o{files[shapes], RunInfo{}, Schedule()};
    o.record_shapes = shapes;
    auto s = RecordingSession::start(o);
    ASSERT_TRUE(s.isOk());
    trainSteps(**s, 2);
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db with(files[true]), without(files[false]);
  EXPECT_EQ(without.scalar("SELECT count(*) FROM op_events WHERE shapes_id IS NOT NULL OR dtypes_id IS NOT NULL"), 0);
  EXPECT_GT(with.scalar("SELECT count(*) FROM op_events WHERE shapes_id IS NOT NULL"), 10);
  // The same ops on the device, each with the same modeled duration.
  const std::string per_op =
      "SELECT group_concat(name || ':' || device || ':' || device_dur_ns, ' ') FROM "
      "(SELECT name, device, device_dur_ns FROM ops WHERE device_dur_ns IS NOT NULL ORDER BY id)";
  const auto a = with.strings(per_op), b = without.strings(per_op);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_FALSE(a[0].empty());
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(with.scalar("SELECT count(*) FROM op_events WHERE device IS NOT NULL"),
            without.scalar("SELECT count(*) FROM op_events WHERE device IS NOT NULL"));
}

TEST(RecordingSession, DeviceInternalWorkIsNotRecorded) {
  const std::string p = tempPath("internal.db");
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    at::Tensor h = at::randn({32, 32}).to(at::kHalf).to(npu::device(0));
    (*s)->step();
    at::Tensor r = at::mm(h, h);  // computed in fp32 by the device, rounded back to fp16
    (*s)->step();
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  // One mm (its structured out= re-dispatch folded in), none of the device's fp16 <-> fp32
  // round trips.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name='aten::mm'"), 1);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name IN ('aten::to', 'aten::_to_copy', "
                      "'aten::copy_', 'aten::clamp', 'aten::nan_to_num', 'aten::empty_strided')"),
            0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND parent_id IS NULL"), 1);
  // Beneath it only the npu result libtorch's structured wrapper allocates; not the fp32 buffers
  // of the round trips (three more aten::empty when the device's internal work is recorded).
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND parent_id IS NOT NULL"), 1);
}

// What the CPU kernel of an npu op dispatches in turn is the emulator's work: a trace of the npu
// shows the op alone, as torch_npu's does, while the same ops on CPU tensors (recorded in the same
// run) show what their kernels call.
TEST(RecordingSession, TheCpuKernelOfAnNpuOpIsNotRecordedInside) {
  const std::string p = tempPath("emulator_work.db");
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    torch::manual_seed(0);
    // 8 x 8 x 8 per batch: libtorch's CPU bmm takes its per-batch loop (select, then addmm).
    const at::Tensor a = at::randn({4, 8, 8}), x = at::randn({2, 3, 8, 8}), w = at::randn({4, 3, 3, 3});
    const at::Tensor an = a.to(npu::device(0)), xn = x.to(npu::device(0)), wn = w.to(npu::device(0));
    (*s)->step();
    at::Tensor on_npu = at::bmm(an, an);
    at::Tensor conv_npu = at::conv2d(xn, wn);
    (*s)->step();
    at::Tensor on_cpu = at::bmm(a, a);
    at::Tensor conv_cpu = at::conv2d(x, w);
    (*s)->step();
    EXPECT_TRUE(at::allclose(on_npu.cpu(), on_cpu, 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(conv_npu.cpu(), conv_cpu, 1e-5, 1e-5));
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  // Children other than aten::empty: libtorch's structured wrapper allocates bmm's result on the
  // npu before the device computes it, an op of the npu like any other.
  auto children = [&](int step, const std::string& name) {
    return db.scalar("SELECT count(*) FROM ops c JOIN ops o ON c.parent_id = o.id WHERE o.step=" +
                     std::to_string(step) + " AND o.name='" + name + "' AND c.name <> 'aten::empty'");
  };
  // On CPU tensors the kernels' own calls are there (the expectation the npu is held against).
  EXPECT_GT(children(2, "aten::bmm"), 0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops WHERE step=2 AND name='aten::select'"), 0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM ops WHERE step=2 AND name LIKE 'aten::%convolution%' AND device IS NULL"), 1);
  // On the npu: the ops the caller dispatched, leaves where the device computes.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name='aten::bmm' AND device='npu:0'"), 1);
  EXPECT_EQ(children(1, "aten::bmm"), 0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name IN ('aten::select', 'aten::addmm', "
                      "'aten::mkldnn_convolution', 'aten::resolve_conj')"),
            0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name='aten::convolution_overrideable'"), 1);
  EXPECT_EQ(children(1, "aten::convolution_overrideable"), 0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND device IS NULL AND name <> 'aten::empty'"), 0);
  // Both npu kernels are leaves, so the cost model times them.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE step=1 AND name IN ('aten::bmm', "
                      "'aten::convolution_overrideable') AND device_dur_ns > 0"),
            2);
}

// With float-status tracking on, each step's first overflowing op becomes an overflow event of
// source first_op, linked to that op's row: step 1's mul (300 * 300 past fp16's 65504), not the
// add after it; step 0 overflowed nowhere; step 2 overflows again in its own first op.
TEST(RecordingSession, EachStepNamesItsFirstOverflowingOp) {
  const std::string p = tempPath("first_overflow.db");
  npu::set_float_status_tracking(true);
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    at::Tensor h = at::full({16}, 300.0f).to(at::kHalf).to(npu::device(0));
    at::Tensor ok = h + h;  // step 0: 600, fine
    (*s)->step();
    at::Tensor small = h * 0.5;
    at::Tensor big = h * h;     // step 1: the first overflow
    at::Tensor worse = big + 1;  // inf in, inf out: not the first
    (*s)->step();
    at::Tensor again = big - 1;  // step 2: its first op already sees inf
    (*s)->step();
    {
      RecordingSession::Paused paused(s->get());  // work the session does not record
      at::Tensor unseen = h * h;
    }
    at::Tensor seen = h * 400.0;  // step 3's first overflow is this one
    (*s)->step();
    ASSERT_TRUE((*s)->stop().isOk());
  }
  npu::set_float_status_tracking(false);
  npu::clear_float_status(0);
  Db db(p);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM overflow_events WHERE source='first_op'"), 3);
  EXPECT_EQ(db.strings("SELECT detail FROM overflow_events WHERE step=3 AND source='first_op'").size(), 1u);
  EXPECT_NE(db.strings("SELECT detail FROM overflow_events WHERE step=3")[0].find("\"out_max_abs\": 120000,"),
            std::string::npos) << "the paused mul (90000) is not step 3's first overflow";
  EXPECT_EQ(db.scalar("SELECT count(*) FROM overflow_events WHERE source='first_op' AND step=0"), 0);
  EXPECT_EQ(db.strings("SELECT o.name FROM overflow_events e JOIN ops o ON o.id=e.op_id WHERE e.step=1"),
            std::vector<std::string>{"aten::mul"});
  EXPECT_EQ(db.scalar("SELECT o.step FROM overflow_events e JOIN ops o ON o.id=e.op_id WHERE e.step=1"), 1);
  EXPECT_EQ(db.strings("SELECT op_name FROM overflow_events WHERE step=2"), std::vector<std::string>{"aten::sub"});
  const auto detail = db.strings("SELECT detail FROM overflow_events WHERE step=1");
  ASSERT_EQ(detail.size(), 1u);
  EXPECT_NE(detail[0].find("\"phase\": \"forward\""), std::string::npos) << detail[0];
  EXPECT_NE(detail[0].find("\"out_max_abs\": 90000,"), std::string::npos) << detail[0];
  EXPECT_NE(detail[0].find("\"out_inf\": 16,"), std::string::npos) << detail[0];
  EXPECT_NE(detail[0].find("\"in_max_abs\": 300,"), std::string::npos) << detail[0];
}

// Saturation mode: results stay finite (clamped to 65504) and only the register knows; the step
// still names the op whose result overflowed, with what it would have been.
TEST(RecordingSession, SaturationModeNamesTheFirstOverflowingOpToo) {
  const std::string p = tempPath("first_overflow_sat.db");
  npu::set_overflow_mode(npu::OverflowMode::kSaturation);
  npu::set_float_status_tracking(true);
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    at::Tensor h = at::full({16}, 300.0f).to(at::kHalf).to(npu::device(0));
    at::Tensor ok = h + h;
    (*s)->step();
    at::Tensor big = h * h;  // 90000: clamped to 65504
    EXPECT_EQ(big.cpu().to(at::kFloat)[0].item<float>(), 65504.0f);
    at::Tensor bigger = big * 2;  // overflows again: not the first
    at::Tensor almost = (big.to(at::kFloat) + 15.0f).to(at::kHalf);  // 65519 rounds to 65504: no overflow
    (*s)->step();
    ASSERT_TRUE((*s)->stop().isOk());
  }
  npu::set_float_status_tracking(false);
  npu::set_overflow_mode(npu::OverflowMode::kInfNan);
  npu::clear_float_status(0);
  Db db(p);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM overflow_events WHERE source='first_op'"), 1);
  EXPECT_EQ(db.strings("SELECT o.name FROM overflow_events e JOIN ops o ON o.id=e.op_id WHERE e.step=1"),
            std::vector<std::string>{"aten::mul"});
  const auto detail = db.strings("SELECT detail FROM overflow_events WHERE step=1");
  ASSERT_EQ(detail.size(), 1u);
  EXPECT_NE(detail[0].find("\"out_max_abs\": 90000,"), std::string::npos) << detail[0];
  EXPECT_NE(detail[0].find("\"out_inf\": 16,"), std::string::npos) << detail[0];
}

TEST(RecordingSession, ScheduleKeepsOnlyActiveSteps) {
  const std::string p = tempPath("schedule.db");
  auto sched = Schedule::parse("skip_first=1,wait=1,warmup=1,active=2,repeat=1");
  ASSERT_TRUE(sched.isOk());
  {
    auto s = RecordingSession::start({p, RunInfo{}, *sched});
    ASSERT_TRUE(s.isOk());
    trainSteps(**s, 8);
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  // steps: 0 skipped, 1 wait, 2 warmup, 3-4 active, then done (repeat=1)
  EXPECT_EQ(db.strings("SELECT DISTINCT step FROM ops ORDER BY step"), (std::vector<std::string>{"3", "4"}));
  EXPECT_EQ(db.strings("SELECT step FROM steps ORDER BY step"), (std::vector<std::string>{"3", "4"}));
}

// An op that began in a warmup step (seen, not kept) and ended in a recorded one is kept with its
// name: the recorder looks names up at an op's start only while it keeps ops.
TEST(RecordingSession, AScopeThatBeganInWarmupIsRecordedWithItsName) {
  const std::string p = tempPath("warmup_scope.db");
  auto sched = Schedule::parse("warmup=1,active=1,repeat=1");
  ASSERT_TRUE(sched.isOk());
  {
    auto s = RecordingSession::start({p, RunInfo{}, *sched});
    ASSERT_TRUE(s.isOk());
    const at::Tensor x = at::ones({4}).to(npu::device(0));
    {
      UserScope scope("spans_warmup_and_active");
      (void)(x + 1);     // step 0: warmup
      (*s)->step({});    // step 1 is recorded
      (void)(x * 2);
    }
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  EXPECT_EQ(db.strings("SELECT name FROM ops WHERE name IN ('spans_warmup_and_active', 'aten::mul', 'aten::add')"
                       " ORDER BY name"),
            (std::vector<std::string>{"aten::mul", "spans_warmup_and_active"}));
  EXPECT_EQ(db.scalar("SELECT count(*) FROM op_events WHERE name_id IS NULL OR name_id NOT IN (SELECT id FROM strings)"), 0);
}

// Names that are not operators' (user scopes, autograd nodes) are looked up by content: scopes
// whose names share their length and most characters, strings built anew for each scope as
// autograd builds its node names, keep their own names row after row.
TEST(RecordingSession, LookalikeScopeNamesKeepTheirOwnNames) {
  const std::string p = tempPath("lookalike_scopes.db");
  const std::vector<std::string> names = {"block_A_forward_of_layer_07", "block_B_forward_of_layer_07",
                                          "block_A_forward_of_layer_08", "block_A_forward_of_layer_0"};
  {
    SessionOptions o;
    o.path = p;
    auto s = RecordingSession::start(o);
    ASSERT_TRUE(s.isOk());
    for (int i = 0; i < 12; ++i) {
      const std::string name = names[static_cast<size_t>(i) % names.size()];  // a new string each time
      UserScope scope(name.c_str());
    }
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  std::vector<std::string> want;
  for (int i = 0; i < 12; ++i) want.push_back(names[static_cast<size_t>(i) % names.size()]);
  EXPECT_EQ(db.strings("SELECT name FROM ops WHERE name LIKE 'block_%' ORDER BY id"), want);
}

// A RecordFunction made on one thread may run its callbacks on another (c10d's Gloo work is made
// by the caller and started by a worker thread): the op belongs to the thread that runs it, never
// to the stack of the thread that made it.
TEST(RecordingSession, AnOpStartedOnAnotherThreadThanItsMakerKeepsToTheRunningThread) {
  const std::string p = tempPath("handed_over.db");
  {
    SessionOptions o;
    o.path = p;
    auto s = RecordingSession::start(o);
    ASSERT_TRUE(s.isOk());
    {
      UserScope outer("maker_scope");
      auto made_here = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
      ASSERT_TRUE(made_here->isActive());
      std::thread runner([&] {
        made_here->before("run_elsewhere");
        made_here.reset();  // the end callbacks
      });
      runner.join();
    }
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='run_elsewhere' AND parent_id IS NULL AND depth=0"), 1);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='maker_scope' AND parent_id IS NULL"), 1);
}

TEST(RecordingSession, DumpedTensorsLinkToTheOpsThatProducedThem) {
  const std::string p = tempPath("linked.db");
  auto sched = Schedule::parse("skip_first=1");  // step 0 dumped but not recorded
  ASSERT_TRUE(sched.isOk());
  {
    auto s = RecordingSession::start({p, RunInfo{}, *sched});
    ASSERT_TRUE(s.isOk());
    dumper::Dumper& d = dumper::Dumper::instance();
    dumper::DumpConfig c;
    c.data = dumper::DumpDataKind::kStats;
    ASSERT_TRUE(d.configure(c).isOk());
    RecordingSession* session = s->get();
    d.attach(session->writer(), [session] { return session->currentStep(); });
    ASSERT_TRUE(d.start().isOk());
    trainSteps(**s, 3);
    ASSERT_TRUE(d.stop().isOk());
    ASSERT_TRUE((*s)->stop().isOk());
  }
  Db db(p);
  EXPECT_GT(db.scalar("SELECT count(*) FROM tensor_dumps WHERE step >= 1"), 20);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM tensor_dumps WHERE step >= 1 AND op_id IS NULL"), 0);
  // The linked op is the one that produced the tensor: same type, same step, same direction.
  EXPECT_EQ(db.scalar("SELECT count(*) FROM tensor_dumps d LEFT JOIN ops o ON o.id = d.op_id "
                      "WHERE d.step >= 1 AND (o.name IS NOT d.op_type OR o.step IS NOT d.step OR "
                      "o.is_backward <> (d.op_name LIKE '%.backward'))"),
            0);
  EXPECT_GT(db.scalar("SELECT count(*) FROM tensor_dumps WHERE op_name LIKE '%.backward' AND op_id IS NOT NULL"), 0);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM tensor_dumps WHERE step = 0 AND op_id IS NOT NULL"), 0)
      << "ops of an unrecorded step have no op_events row to link to";
}

TEST(RecordingSession, AWatchNamesTheFirstOpACallStartedAtItsDepth) {
  const std::string p = tempPath("watch.db");
  int64_t outer = -2, inner = -2, after = -2, raised = -2, none = -2, unrecorded = -2;
  {
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    at::Tensor x = at::randn({4, 4}).to(npu::device(0));
    const size_t module = opWatchBegin();    // a module's pre-hook
    const size_t api = opWatchBegin();       // an API call inside it
    at::Tensor y = at::mm(x, x);
    inner = opWatchEnd(api);
    y = y.relu();                            // the module's second op
    outer = opWatchEnd(module);
    const size_t lost = opWatchBegin();      // a call that raised: never ended
    (void)at::neg(x);
    const size_t next = opWatchBegin();
    (void)at::abs(x);
    after = opWatchEnd(next);
    raised = opWatchEnd(lost);               // ended by an outer end (or the step's reset)
    none = opWatchEnd(opWatchBegin());       // a call that ran no op
    ASSERT_TRUE((*s)->stop().isOk());
    unrecorded = opWatchEnd(opWatchBegin()); // nothing records
  }
  Db db(p);
  auto name = [&](int64_t id) {
    auto v = db.strings("SELECT name FROM ops WHERE id = " + std::to_string(id));
    return v.empty() ? std::string("(none)") : v[0];
  };
  EXPECT_EQ(name(inner), "aten::mm");
  EXPECT_EQ(outer, inner) << "a module's first op is its first API's";
  EXPECT_EQ(name(after), "aten::abs");
  EXPECT_EQ(name(raised), "aten::neg");
  EXPECT_EQ(none, -1);
  EXPECT_EQ(unrecorded, -1);
  EXPECT_EQ(opWatchEnd(7), -1) << "an unknown handle";
}

TEST(Schedule, ActionsAndParsing) {
  Schedule s{2, 1, 1, 2, 2};
  std::string got;
  for (int i = 0; i < 12; ++i) {
    auto a = s.actionFor(i);
    got += a == Schedule::Action::kNone ? '.' : a == Schedule::Action::kWarmup ? 'w' : 'R';
  }
  EXPECT_EQ(got, "...wRR.wRR..");
  EXPECT_FALSE(Schedule::parse("wait=x").isOk());
  EXPECT_NE(Schedule::parse("pause=1").status().message().find("unknown key 'pause'"), std::string::npos);
  EXPECT_FALSE(Schedule::parse("active=0").isOk());
  EXPECT_EQ(Schedule::parse("active=3")->actionFor(5), Schedule::Action::kRecord);
}

// recordedOps() counts each thread's ops without a shared counter: it must still add up to the
// rows in the file, include a thread that ended mid-session, and start from 0 in each session.
TEST(RecordingSession, RecordedOpsCountEveryThreadsRowsOfThisSession) {
  at::Tensor x = at::ones({4}).to(npu::device(0));
  for (int session = 0; session < 2; ++session) {
    const std::string p = tempPath("counted" + std::to_string(session) + ".db");
    auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
    ASSERT_TRUE(s.isOk());
    for (int i = 0; i < 5 + session; ++i) x.add_(1);
    std::thread([&] {
      at::Tensor y = at::ones({4}).to(npu::device(0));
      for (int i = 0; i < 7; ++i) y.mul_(2);
    }).join();  // its state is gone before the count is read
    (*s)->step();
    const uint64_t counted = (*s)->recordedOps();
    ASSERT_TRUE((*s)->stop().isOk());
    Db db(p);
    EXPECT_EQ(static_cast<int64_t>(counted), db.scalar("SELECT count(*) FROM op_events"));
    EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='aten::add_'"), 5 + session);
    EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='aten::mul_'"), 7);
  }
}

TEST(RecordingSession, OneAtATimeAndNothingWhenStopped) {
  const std::string p = tempPath("one.db");
  auto s = RecordingSession::start({p, RunInfo{}, Schedule()});
  ASSERT_TRUE(s.isOk());
  auto s2 = RecordingSession::start({tempPath("two.db"), RunInfo{}, Schedule()});
  EXPECT_FALSE(s2.isOk());
  ASSERT_TRUE((*s)->stop().isOk());
  at::Tensor x = at::ones({4}).to(npu::device(0));
  x.add_(1);  // after stop: not recorded
  Db db(p);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM ops WHERE name='aten::add_'"), 0);
}

}  // namespace
}  // namespace npuscope::profiler
