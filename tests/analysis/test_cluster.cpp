// The cluster report (analysis/cluster.h): the step breakdown against intervals worked out by hand,
// the task classes of torch_npu's device tasks, and a two-rank job written here, whose slow rank,
// its op and its collectives are known by construction. (Against torch_npu's own
// step_trace_time.csv of the real sample: test_import; on real ranks: python test_distributed.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "npuscope/analysis/cluster.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::cluster {
namespace {

constexpr int64_t kMs = 1000000;

TEST(ClusterBreakdown, MatchesIntervalsWorkedOutByHand) {
  StepActivity a;
  a.step = 7;
  a.start_ns = -5;
  a.dur_ns = 80;
  // computing: [0,15) (two overlapping kernels) and [50,60): 25; communication [12,35): 23
  a.computing = {{0, 10}, {5, 15}, {50, 60}};
  a.communication = {{12, 35}};
  const StepBreakdown b = breakdown(a);
  EXPECT_EQ(b.step, 7);
  EXPECT_EQ(b.computing, 25);
  EXPECT_EQ(b.communication, 23);
  EXPECT_EQ(b.overlapped, 3);        // [12,15)
  EXPECT_EQ(b.not_overlapped, 20);
  EXPECT_EQ(b.stage, 60);            // 0 .. 60
  EXPECT_EQ(b.free, 15);             // [35,50)
  EXPECT_EQ(b.preparing, 5);         // the first kernel 5 ns after the step began
  EXPECT_EQ(b.step_ns, 80);
  EXPECT_EQ(b.own(), 60);

  StepActivity idle;  // nothing ran: all zero but the step
  idle.dur_ns = 9;
  const StepBreakdown z = breakdown(idle);
  EXPECT_EQ(z.computing + z.communication + z.stage + z.free + z.preparing, 0);
  EXPECT_EQ(z.own(), 9);
}

TEST(ClusterBreakdown, ClassifiesTorchNpuTasks) {
  EXPECT_EQ(classifyTask("hcom_allReduce__586_0_1", "HCCL"), TaskKind::kCommunication);
  EXPECT_EQ(classifyTask("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel"), TaskKind::kCommunication);
  EXPECT_EQ(classifyTask("Conv2D", "Conv2D"), TaskKind::kComputing);
  EXPECT_EQ(classifyTask("MemSet", "MemSet"), TaskKind::kComputing);
  EXPECT_EQ(classifyTask("EVENT_WAIT", "EVENT_WAIT_SQE"), TaskKind::kNeither);
  EXPECT_EQ(classifyTask("Notify Wait", "Notify Wait"), TaskKind::kNeither);
  EXPECT_EQ(classifyTask("SDMA", "SDMA"), TaskKind::kNeither);
}

class ClusterJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("npuscope_cluster_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  struct Op {
    std::string name;
    int64_t step, start, dur;
    bool device;
  };
  // One rank's run: steps of 100 ms from t = 0; `ops` at their times (top level); collectives.
  std::string writeRank(const std::string& file, int64_t rank, int64_t world, const std::string& job,
                        const std::vector<Op>& ops, const std::vector<CollectiveRecord>& colls, int64_t wall = 1000) {
    const std::string path = (dir_ / file).string();
    auto w = TraceWriter::open(path);
    EXPECT_TRUE(w.isOk());
    RunInfo info;
    info.wall_start_ns = wall;
    info.rank = rank;
    info.world_size = world;
    info.job = job;
    EXPECT_TRUE((*w)->beginRun(info).isOk());
    auto buf = (*w)->takeBuffer();
    int64_t id = 1;
    for (const Op& o : ops) {
      OpRecord r;
      r.id = id++;
      r.start_ns = o.start;
      r.dur_ns = o.dur;
      r.thread_id = 1;
      r.step = static_cast<int32_t>(o.step);
      r.name_id = StringTable::global().intern(o.name);
      if (o.device) {
        r.device = 0;
        r.device_dur_ns = o.dur;
      }
      buf->records[buf->size++] = r;
    }
    (*w)->submit(buf);
    for (const CollectiveRecord& c : colls) (*w)->addCollective(c);
    for (int64_t s = 0; s < 2; ++s) {
      StepRecord st;
      st.step = s;
      st.start_ns = s * 100 * kMs;
      st.dur_ns = 100 * kMs;
      (*w)->addStep(st);
    }
    EXPECT_TRUE((*w)->endRun("completed").isOk());
    return path;
  }
  static CollectiveRecord allreduce(int64_t step, int64_t seq, int64_t start, int64_t end) {
    CollectiveRecord c;
    c.step = step;
    c.seq = seq;
    c.kind = "allreduce";
    c.bytes = 4 * kMs;
    c.dtype = "float";
    c.group_size = 2;
    c.start_ns = start;
    c.end_ns = end;
    return c;
  }
  std::filesystem::path dir_;
};

TEST_F(ClusterJob, NamesTheSlowRankItsStepAndItsOp) {
  // Both ranks compute 20 ms per step, then all-reduce. In step 1 rank 1 spends 30 ms more in
  // "late" first, so rank 0 waits 30 ms more in its all-reduce.
  writeRank("r0.db", 0, 2, "job-a",
            {{"conv", 0, 0, 20 * kMs, true}, {"conv", 1, 100 * kMs, 20 * kMs, true}},
            {allreduce(0, 1, 20 * kMs, 30 * kMs), allreduce(1, 2, 120 * kMs, 160 * kMs)});
  writeRank("r1.db", 1, 2, "job-a",
            {{"conv", 0, 0, 20 * kMs, true}, {"conv", 1, 100 * kMs, 20 * kMs, true},
             {"late", 1, 120 * kMs, 30 * kMs, false},
             // Gloo's own span of the all-reduce on a worker thread: waiting, never "where".
             {"gloo:all_reduce", 1, 100 * kMs, 60 * kMs, false}},
            {allreduce(0, 1, 20 * kMs, 30 * kMs), allreduce(1, 2, 150 * kMs, 160 * kMs)});
  // An older job's rank in the same folder, and a file with no rank: left out, said so.
  writeRank("old.db", 0, 2, "job-old", {}, {}, /*wall=*/10);
  auto rep = analyze({dir_.string()});
  ASSERT_TRUE(rep.isOk()) << rep.status().message();
  EXPECT_EQ(rep->job, "job-a");
  ASSERT_EQ(rep->ranks.size(), 2u);
  ASSERT_EQ(rep->common_steps, (std::vector<int64_t>{0, 1}));
  const StepBreakdown& r0s1 = rep->ranks[0].steps[1];
  EXPECT_EQ(r0s1.computing, 20 * kMs);
  EXPECT_EQ(r0s1.communication, 40 * kMs);
  EXPECT_EQ(r0s1.not_overlapped, 40 * kMs);
  EXPECT_EQ(r0s1.free, 0);
  const StepBreakdown& r1s1 = rep->ranks[1].steps[1];
  EXPECT_EQ(r1s1.communication, 10 * kMs);
  EXPECT_EQ(r1s1.free, 30 * kMs);  // host time in "late", no device work
  const SlowRank& s = rep->slow;
  // own time: rank 0 = (100-10) + (100-40) = 150 ms; rank 1 = 90 + 90 = 180 ms
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.fastest, 0);
  EXPECT_EQ(s.own_ns, 180 * kMs);
  EXPECT_EQ(s.fastest_own_ns, 150 * kMs);
  EXPECT_NEAR(s.spread, 30.0 / 165.0, 1e-9);
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(s.step_lost_ns, 30 * kMs);
  EXPECT_EQ(s.free_more_ns, 30 * kMs);
  EXPECT_EQ(s.computing_more_ns, 0);
  EXPECT_EQ(s.op, "late");
  EXPECT_EQ(s.op_more_ns, 30 * kMs);
  // What a cluster timeline draws: each step's intervals united, every collective as seen.
  const Rank& r0 = rep->ranks[0];
  ASSERT_EQ(r0.activity.size(), 2u);
  ASSERT_EQ(r0.activity[1].communication.size(), 1u);
  EXPECT_EQ(r0.activity[1].communication[0].begin_ns, 120 * kMs);
  EXPECT_EQ(r0.activity[1].communication[0].end_ns, 160 * kMs);
  ASSERT_EQ(r0.collective_rows.size(), 2u);
  EXPECT_EQ(r0.collective_rows[1].seq, 2);
  EXPECT_EQ(r0.wall_offset_ns, r0.run.wall_start_ns - r0.run.started_ns);
  ASSERT_EQ(rep->ranks[0].collectives.size(), 1u);
  const CollectiveStat& c = rep->ranks[0].collectives[0];
  EXPECT_EQ(c.kind, "allreduce");
  EXPECT_EQ(c.count, 2);
  EXPECT_EQ(c.bytes, 8 * kMs);
  EXPECT_EQ(c.time_ns, 50 * kMs);
  EXPECT_EQ(c.max_ns, 40 * kMs);
  // All-reduce #2: rank 0 enqueued it at 120 ms, rank 1 (last) at 150: 30 ms of waiting; the
  // bandwidth is over the 20 ms in transit.
  EXPECT_EQ(c.wait_ns, 30 * kMs);
  EXPECT_EQ(c.transitNs(), 20 * kMs);
  EXPECT_DOUBLE_EQ(c.gbps(), 8.0 * kMs / (20.0 * kMs));
  EXPECT_EQ(rep->ranks[1].collectives[0].wait_ns, 0);
  ASSERT_EQ(rep->last_arrival.count({0, 2}), 1u);
  EXPECT_EQ(rep->last_arrival.at({0, 2}).rank_index, 1);
  ASSERT_EQ(rep->notes.size(), 1u);
  EXPECT_NE(rep->notes[0].find("job-old"), std::string::npos) << rep->notes[0];
  const std::string text = formatText(*rep, 0.05);
  EXPECT_NE(text.find("Slow rank: rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("where: late"), std::string::npos) << text;

  // Above the threshold only: 30/165 = 18.2 %.
  auto lenient = analyze({dir_.string()}, "", 0.2);
  ASSERT_TRUE(lenient.isOk());
  EXPECT_FALSE(lenient->slow.found);
  // The older job when asked for: one rank of two, the missing one named.
  auto old = analyze({(dir_ / "old.db").string(), (dir_ / "r0.db").string()}, "job-old");
  ASSERT_TRUE(old.isOk());
  ASSERT_EQ(old->ranks.size(), 1u);
  bool missing = false;
  for (const std::string& n : old->notes) missing |= n.find("ranks missing of a world of 2: 1") != std::string::npos;
  EXPECT_TRUE(missing);
}

TEST_F(ClusterJob, RefusesWhatIsNoJob) {
  auto none = analyze({(dir_ / "nope.db").string()});
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find("nope.db: no such trace file or folder"), std::string::npos);
  auto empty = analyze({dir_.string()});
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.status().message().find("no trace files (*.db) in the folder"), std::string::npos);
  writeRank("single.db", -1, -1, "", {}, {});
  auto unranked = analyze({(dir_ / "single.db").string()});
  ASSERT_FALSE(unranked.isOk());
  EXPECT_NE(unranked.status().message().find("no run of a multi-rank job"), std::string::npos)
      << unranked.status().message();
}

TEST_F(ClusterJob, AFolderKeepsItsReadableRanksAndNamesTheOthers) {
  writeRank("r0.db", 0, 2, "job-a", {}, {allreduce(0, 1, 20 * kMs, 30 * kMs)});
  writeRank("r1.db", 1, 2, "job-a", {}, {allreduce(0, 1, 20 * kMs, 30 * kMs)});
  {
    std::ofstream junk(dir_ / "junk.db", std::ios::binary);
    junk << std::string(4096, 'x');  // not an SQLite file
  }
  auto rep = analyze({dir_.string()});
  ASSERT_TRUE(rep.isOk()) << rep.status().message();
  EXPECT_EQ(rep->ranks.size(), 2u);
  ASSERT_EQ(rep->notes.size(), 1u);
  EXPECT_NE(rep->notes[0].find("junk.db"), std::string::npos) << rep->notes[0];
  EXPECT_NE(rep->notes[0].find("left out"), std::string::npos) << rep->notes[0];
  // Named on its own, the same file is an error.
  auto named = analyze({(dir_ / "r0.db").string(), (dir_ / "junk.db").string()});
  ASSERT_FALSE(named.isOk());
  EXPECT_NE(named.status().message().find("junk.db"), std::string::npos) << named.status().message();
}

TEST(ClusterFiles, RankFilePathGoesBeforeTheExtension) {
  EXPECT_EQ(npuscope::cluster::rankFilePath("run.db", 1), "run.rank1.db");
  EXPECT_EQ(npuscope::cluster::rankFilePath("/a.b/run", 12), "/a.b/run.rank12");
  EXPECT_EQ(npuscope::cluster::rankFilePath("out/x.y.sqlite", 3), "out/x.y.rank3.sqlite");
}

TEST_F(ClusterJob, OneFileNamedFindsItsRankSiblingsAndNothingElse) {
  // Ranks given one path: rank 0 in run.db, rank 1 in run.rank1.db. Look-alikes stay out.
  writeRank("run.db", 0, 2, "job-a", {}, {allreduce(0, 1, 20 * kMs, 30 * kMs)});
  writeRank("run.rank1.db", 1, 2, "job-a", {}, {allreduce(0, 1, 20 * kMs, 30 * kMs)});
  writeRank("run.rankx.db", 2, 3, "job-b", {}, {});
  writeRank("rerun.rank1.db", 1, 2, "job-b", {}, {});
  auto rep = analyze({(dir_ / "run.db").string()});
  ASSERT_TRUE(rep.isOk()) << rep.status().message();
  ASSERT_EQ(rep->ranks.size(), 2u);
  EXPECT_EQ(rep->job, "job-a");
  EXPECT_TRUE(rep->notes.empty()) << rep->notes[0];
  // Named as well, the sibling is read once.
  auto both = analyze({(dir_ / "run.db").string(), (dir_ / "run.rank1.db").string()});
  ASSERT_TRUE(both.isOk()) << both.status().message();
  EXPECT_EQ(both->ranks.size(), 2u);
}

// A rank's file whose strings table a fuzzer's mutation damaged (a recorded rank 1 of 2, still
// opening): the report is built from what reads, and a note names the file and the damage.
TEST_F(ClusterJob, ADamagedRankFileIsNamedInTheNotes) {
  const std::filesystem::path damaged = dir_ / "rank1.db";
  std::filesystem::copy_file(std::filesystem::path(NPUSCOPE_FUZZ_CORPUS) / "trace_file" / "uaf-duplicate-string-id.db",
                             damaged);
  auto rep = analyze({damaged.string()});
  ASSERT_TRUE(rep.isOk()) << rep.status().message();
  ASSERT_EQ(rep->ranks.size(), 1u);
  EXPECT_FALSE(rep->ranks[0].steps.empty());
  size_t damage_notes = 0;
  for (const std::string& n : rep->notes) {
    if (n.rfind(damaged.string() + " (rank 1's) is damaged: its strings table ", 0) == 0) ++damage_notes;
  }
  EXPECT_GE(damage_notes, 1u) << formatText(*rep, 0.05);
}

// A damaged file whose op durations sum past the int64 range (found by fuzz_trace_file:
// fuzz/corpus/trace_file/crash-ubsan-self-time-overflow.db): the per-step self times saturate
// instead of overflowing. The file is refused further on ("database disk image is
// malformed"), after the steps whose self times overflowed; the overflow itself is undefined
// behaviour, which the sanitizer stage of CI (scripts/sanitize.sh: this test under UBSan,
// halting on the first report) catches.
TEST(ClusterFiles, SelfTimesOfHugeDurationsSaturate) {
  const std::string seed = std::string(NPUSCOPE_FUZZ_CORPUS) + "/trace_file/crash-ubsan-self-time-overflow.db";
  const std::string copy =
      (std::filesystem::temp_directory_path() / ("npuscope_selftime_" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::copy_file(seed, copy, std::filesystem::copy_options::overwrite_existing);
  auto r = analyze({copy});
  std::filesystem::remove(copy);
  if (r.isOk()) {
    for (const auto& rank : r->ranks) {
      for (const auto& [step, names] : rank.step_self_ns) {
        for (const auto& [name, ns] : names) EXPECT_GE(ns, 0) << name;
      }
    }
  } else {
    EXPECT_NE(r.status().message().find("malformed"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace npuscope::cluster
