// The trace writer: many producers, nothing lost or duplicated, drops counted, commits on time,
// string ids mapped into each file.
#include <sqlite3.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <cstdio>
#include <thread>

#include "npuscope/store/clock.h"
#include "npuscope/store/database.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_reader.h"
#include "npuscope/store/trace_writer.h"
#include "support/scratch_db.h"

namespace npuscope {
namespace {

using testing_support::tempPath;

int64_t scalar(const std::string& path, const std::string& sql) {
  auto db = openTraceDatabase(path, OpenMode::kReadOnly);
  EXPECT_TRUE(db.isOk()) << db.status().message();
  if (!db.isOk()) return -1;
  auto st = prepare(db->get(), sql);
  EXPECT_TRUE(st.isOk()) << st.status().message();
  if (!st.isOk() || sqlite3_step(st->get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(st->get(), 0);
}

RunInfo info() {
  RunInfo r;
  r.started_ns = nowNs();
  r.command = "test";
  r.model = "cnn";
  r.device = "npu:0";
  return r;
}

// xorshift bytes: incompressible, so stored at full size.
std::vector<uint8_t> xorshiftBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    b = static_cast<uint8_t>(seed);
  }
  return v;
}

// Appends `count` top-level ops named `name`, ids from `first_id`, to `buf`.
void fillOps(OpBuffer& buf, int64_t first_id, int64_t count, uint32_t name) {
  for (int64_t i = 0; i < count; ++i) buf.records[buf.size++] = OpRecord{first_id + i, -1, i, 1, -1, -1, -1, 9, 0, name};
}

// Each writer holds its own reserve beside the file (docs/schema.md, "Full disks"): two writers of
// one file never take each other's, closing removes a writer's own, and one left by a process
// that is gone is removed by the next writer.
TEST(TraceWriter, EachWriterHoldsItsOwnReserveAndClearsThoseOfDeadProcesses) {
  const std::string path = tempPath("reserve.db");
  const std::string name = std::filesystem::path(path).filename().string();
  auto reserves = [&] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
      const std::string n = e.path().filename().string();
      if (n.rfind(name + "-reserve-", 0) == 0) out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  for (const std::string& r : reserves()) std::filesystem::remove(std::filesystem::path(path).parent_path() / r);
  // A reserve left by a process that no longer exists: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = path + "-reserve-" + std::to_string(child) + "-1";
  { std::ofstream(stale) << "x"; }
  auto a = TraceWriter::open(path);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the dead process's reserve is removed";
  auto b = TraceWriter::open(path);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  const auto both = reserves();
  ASSERT_EQ(both.size(), 2u);
  for (const std::string& r : both) {
    EXPECT_EQ(std::filesystem::file_size(std::filesystem::path(path).parent_path() / r), 64u * 1024) << r;
    EXPECT_EQ(r.rfind(name + "-reserve-" + std::to_string(::getpid()) + "-", 0), 0u) << r;
  }
  a->reset();
  EXPECT_EQ(reserves().size(), 1u) << "closing one writer leaves the other's reserve";
  b->reset();
  EXPECT_TRUE(reserves().empty());
}

TEST(TraceWriter, FourProducersLoseNothing) {
  const std::string p = tempPath("four.db");
  constexpr int kThreads = 4, kBuffers = 30, kPerBuffer = 1000;
  const uint32_t names[kThreads] = {StringTable::global().intern("aten::add"), StringTable::global().intern("aten::mm"),
                                    StringTable::global().intern("aten::relu"),
                                    StringTable::global().intern("aten::conv2d")};
  {
    auto w = TraceWriter::open(p, TraceWriter::Options{500, 100000});
    ASSERT_TRUE(w.isOk()) << w.status().message();
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto buf = (*w)->takeBuffer();
        for (int b = 0; b < kBuffers; ++b) {
          for (int i = 0; i < kPerBuffer; ++i) {
            OpRecord& r = buf->records[buf->size++];
            r = OpRecord();
            r.id = (static_cast<int64_t>(t) * kBuffers + b) * kPerBuffer + i + 1;
            r.name_id = names[t];
            r.thread_id = static_cast<uint64_t>(t);
            r.start_ns = i;
            r.dur_ns = 1;
          }
          (*w)->submit(buf);
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_TRUE((*w)->endRun("completed").isOk());
    EXPECT_EQ((*w)->droppedRecords(), 0u);
  }
  const int64_t total = int64_t{kThreads} * kBuffers * kPerBuffer;
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), total);
  EXPECT_EQ(scalar(p, "SELECT count(DISTINCT id) FROM op_events"), total);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM ops WHERE name='aten::mm' AND thread_id=1"), total / kThreads);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM ops WHERE name='aten::conv2d' AND thread_id<>3"), 0);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs WHERE status='completed' AND ended_ns IS NOT NULL"), 1);
}

TEST(TraceWriter, OverflowingTheQueueIsCountedNotQueued) {
  const std::string p = tempPath("drops.db");
  {
    auto w = TraceWriter::open(p, TraceWriter::Options{500, 0});  // room for no buffer at all
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    auto buf = (*w)->takeBuffer();
    buf->size = 123;
    EXPECT_FALSE((*w)->submit(buf));
    ASSERT_TRUE(buf != nullptr);
    EXPECT_EQ(buf->size, 0u);  // handed back empty for reuse
    buf->size = 7;
    EXPECT_FALSE((*w)->submit(buf));
    EXPECT_EQ((*w)->droppedRecords(), 130u);
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT dropped_records FROM runs"), 130);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 0);
}

TEST(TraceWriter, CommitsWithinTheIntervalWithoutFlush) {
  const std::string p = tempPath("interval.db");
  auto w = TraceWriter::open(p, TraceWriter::Options{200, 16});
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(info()).isOk());
  auto buf = (*w)->takeBuffer();
  fillOps(*buf, 1, 10, StringTable::global().intern("aten::x"));
  ASSERT_TRUE((*w)->submit(buf));
  StepRecord s;
  s.step = 0;
  s.loss = 2.5;
  s.loss_scale = 65536;
  (*w)->addStep(s);
  // Another connection sees the rows once the commit interval has passed, while the writer lives.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 10);
  EXPECT_EQ(scalar(p, "SELECT loss_scale FROM steps WHERE step=0"), 65536);
  EXPECT_EQ(scalar(p, "SELECT status='running' FROM runs"), 1);
}

// A training loop's step ends hand over partial buffers and step records without waking the
// writer (each wake takes a core from the training threads); a full buffer wakes it, and it
// then writes everything queued. The 5 s interval is far from every check here.
TEST(TraceWriter, StepEndRecordsWaitForAWakeAndAFullBufferWakesTheWriter) {
  const std::string p = tempPath("wake.db");
  auto w = TraceWriter::open(p, TraceWriter::Options{5000, 16});
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(info()).isOk());
  const uint32_t name = StringTable::global().intern("aten::x");
  auto buf = (*w)->takeBuffer();
  fillOps(*buf, 1, 10, name);
  ASSERT_TRUE((*w)->submit(buf));
  StepRecord s;
  s.step = 0;
  (*w)->addStep(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ((*w)->writtenOps(), 0u);

  buf = (*w)->takeBuffer();
  fillOps(*buf, 100, static_cast<int64_t>(OpBuffer::kCapacity), name);
  ASSERT_TRUE((*w)->submit(buf));
  const uint64_t all = 10 + OpBuffer::kCapacity;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while ((*w)->writtenOps() < all && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*w)->writtenOps(), all);
  ASSERT_TRUE((*w)->flush().isOk());
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM steps"), 1);
}

// Dumped payloads commit by size as well as by time, so their pages reach the file while the
// dumper is still producing rather than in one burst at its flush. With an interval of ten
// minutes, only the size can have committed them.
TEST(TraceWriter, LargeDumpPayloadsCommitWithoutWaitingForTheInterval) {
  const std::string p = tempPath("dump_commit.db");
  auto w = TraceWriter::open(p, TraceWriter::Options{600000, 16});
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(info()).isOk());
  auto row = [](size_t bytes, uint32_t seed) {
    TensorDumpRecord r;
    r.op_name = "addmm.0.forward";
    r.op_type = "aten::addmm";
    r.io = "output";
    r.dtype = "uint8";
    r.shape = "[" + std::to_string(bytes) + "]";
    r.data = xorshiftBytes(bytes, seed);
    return r;
  };
  std::vector<TensorDumpRecord> small;
  small.push_back(row(1000, 7));
  (*w)->addTensorDumps(std::move(small));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM tensor_dumps"), 0);  // neither interval nor size reached

  std::vector<TensorDumpRecord> large;
  large.push_back(row(size_t{12} << 20, 11));
  (*w)->addTensorDumps(std::move(large));
  int64_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((seen = scalar(p, "SELECT count(*) FROM tensor_dumps")) < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(scalar(p, "SELECT length(data) FROM tensor_dumps WHERE idx=0 ORDER BY id DESC LIMIT 1"), 12 << 20);
}

// The stored form of a payload: a zstd frame that decodes to it when that is smaller, else the
// raw bytes (encodeDumpPayload says false); raw bytes that look like a frame are always framed.
TEST(TraceWriter, DumpPayloadEncodingRoundTripsAndKeepsWhatDoesNotShrink) {
  std::vector<uint8_t> zeros_and_ramp(size_t{1} << 20, 0);  // a ReLU output: half zeros
  for (size_t i = 0; i < zeros_and_ramp.size(); i += 2) zeros_and_ramp[i] = static_cast<uint8_t>(i / 2);
  std::vector<uint8_t> frame;
  ASSERT_TRUE(encodeDumpPayload(zeros_and_ramp.data(), zeros_and_ramp.size(), &frame));
  ASSERT_LT(frame.size(), zeros_and_ramp.size() / 2);
  std::vector<uint8_t> back(zeros_and_ramp.size());
  ASSERT_EQ(ZSTD_decompress(back.data(), back.size(), frame.data(), frame.size()), back.size());
  EXPECT_EQ(back, zeros_and_ramp);

  const auto noise = xorshiftBytes(size_t{1} << 20, 5);
  frame.clear();
  EXPECT_FALSE(encodeDumpPayload(noise.data(), noise.size(), &frame));
  EXPECT_TRUE(frame.empty());
  const std::vector<uint8_t> tiny(100, 0);
  EXPECT_FALSE(encodeDumpPayload(tiny.data(), tiny.size(), &frame));  // not worth a frame header

  std::vector<uint8_t> magic = xorshiftBytes(64, 9);  // starts like a frame: must not be read as one
  magic[0] = 0x28, magic[1] = 0xB5, magic[2] = 0x2F, magic[3] = 0xFD;
  ASSERT_TRUE(encodeDumpPayload(magic.data(), magic.size(), &frame));
  back.assign(magic.size(), 0);
  ASSERT_EQ(ZSTD_decompress(back.data(), back.size(), frame.data(), frame.size()), magic.size());
  EXPECT_EQ(back, magic);
}

TensorDumpRecord dumpRow(int64_t step, const char* io, int64_t idx, std::vector<uint8_t> data, uint64_t key,
                         uint64_t same_as) {
  TensorDumpRecord r;
  r.step = step;
  r.op_name = "relu." + std::to_string(idx) + ".forward";
  r.op_type = "aten::relu";
  r.io = io;
  r.idx = idx;
  r.dtype = "uint8";
  r.shape = "[4096]";
  r.data = std::move(data);
  r.payload_key = key;
  r.same_data_as = same_as;
  return r;
}

// A payload shared within a step is stored once: the sharing row has no data of its own, names
// the holding row in data_ref, and reads back with the holder's bytes. Keys name rows of the
// current step only, so a key used again in the next step names that step's row.
TEST(TraceWriter, PayloadsSharedWithinAStepAreStoredOnceAndReadBack) {
  const std::string p = tempPath("shared.db");
  const auto a = xorshiftBytes(4096, 3), b = xorshiftBytes(4096, 4);
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    std::vector<TensorDumpRecord> op1, op2, op3;
    op1.push_back(dumpRow(0, "output", 0, a, 1, 0));
    op2.push_back(dumpRow(0, "input", 0, {}, 0, 1));  // the previous op's output
    op2.push_back(dumpRow(0, "output", 1, b, 2, 0));
    op3.push_back(dumpRow(1, "input", 2, b, 1, 0));    // key 1 again, in step 1: now b
    op3.push_back(dumpRow(1, "output", 3, {}, 0, 1));
    for (auto* op : {&op1, &op2, &op3}) (*w)->addTensorDumps(std::move(*op));
    ASSERT_TRUE((*w)->flush().isOk());
    ASSERT_TRUE((*w)->error().isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT sum(length(data)) FROM tensor_dumps"), 3 * 4096);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM tensor_dumps WHERE data IS NULL AND data_ref IS NOT NULL"), 2);
  auto r = TraceReader::open(p);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  auto run = (*r)->latestRun();
  ASSERT_TRUE(run.isOk());
  auto rows = (*r)->tensorDumps(run->id);
  ASSERT_TRUE(rows.isOk());
  ASSERT_EQ(rows->size(), 5u);
  const std::vector<uint8_t>* expected[] = {&a, &a, &b, &b, &b};
  const int64_t refs[] = {-1, (*rows)[0].id, -1, -1, (*rows)[3].id};
  for (size_t i = 0; i < rows->size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*rows)[i].data_ref, refs[i]);
    EXPECT_EQ((*rows)[i].data_bytes, 4096);
    auto data = (*r)->tensorDumpData((*rows)[i].id);
    ASSERT_TRUE(data.isOk());
    EXPECT_FALSE(data->zstd_frame);
    EXPECT_EQ(data->bytes, *expected[i]);
  }
}

// A row that shares a payload no earlier row of its step holds is a producer's error: the
// writer reports it, naming the row and the key, and keeps what it wrote before.
TEST(TraceWriter, SharingAPayloadNoRowOfTheStepHoldsIsAnError) {
  const std::string p = tempPath("shared_bad.db");
  auto w = TraceWriter::open(p);
  ASSERT_TRUE(w.isOk());
  ASSERT_TRUE((*w)->beginRun(info()).isOk());
  std::vector<TensorDumpRecord> op1, op2;
  op1.push_back(dumpRow(0, "output", 0, xorshiftBytes(4096, 3), 7, 0));
  op2.push_back(dumpRow(1, "input", 0, {}, 0, 7));  // key 7 belongs to step 0
  (*w)->addTensorDumps(std::move(op1));
  ASSERT_TRUE((*w)->flush().isOk());
  EXPECT_FALSE((*w)->failed());
  (*w)->addTensorDumps(std::move(op2));
  EXPECT_FALSE((*w)->flush().isOk());
  EXPECT_TRUE((*w)->failed());
  const std::string m = (*w)->error().message();
  EXPECT_NE(m.find("relu.0.forward input 0 shares payload 7"), std::string::npos) << m;
  w->reset();
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM tensor_dumps"), 1);
}

int64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Checkpoints run beside the writer, on their own connection: committed pages reach the
// database file while the writer stays open, and closing it leaves no WAL behind.
TEST(TraceWriter, WalIsCheckpointedWhileWritingAndRemovedAtClose) {
  const std::string p = tempPath("checkpoint.db");
  {
    auto w = TraceWriter::open(p, TraceWriter::Options{100, 16});
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    const int64_t before = fileSize(p);
    for (uint32_t i = 0; i < 24; ++i) {  // 24 MiB: about 1,500 16-KiB pages, past the 1,000-page threshold
      std::vector<TensorDumpRecord> rows(1);
      rows[0].op_name = "mm." + std::to_string(i) + ".forward";
      rows[0].io = "output";
      rows[0].data = xorshiftBytes(size_t{1} << 20, i + 1);
      (*w)->addTensorDumps(std::move(rows));
      ASSERT_TRUE((*w)->flush().isOk());
    }
    int64_t size = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((size = fileSize(p)) < (int64_t{15} << 20) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_GE(size, int64_t{15} << 20) << "database file still " << size << " bytes (" << before << " at the start)";
    EXPECT_TRUE((*w)->endRun("completed").isOk());
  }
  EXPECT_EQ(fileSize(p + "-wal"), -1);  // gone once the last connection closed
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM tensor_dumps"), 24);
  EXPECT_EQ(scalar(p, "SELECT sum(length(data)) FROM tensor_dumps"), 24 << 20);
}

// A batch of memory samples is written 32 rows per statement and the rest one by one: every
// sample arrives with its own values, in order.
TEST(TraceWriter, MemoryBatchesKeepEverySample) {
  const std::string p = tempPath("memory_batch.db");
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    std::vector<MemoryRecord> batch;
    for (int i = 0; i < 100; ++i) {
      batch.push_back(MemoryRecord{1000 + i, i % 3, static_cast<uint64_t>(i) * 512, static_cast<uint64_t>(i) * 1024 + 7});
    }
    (*w)->addMemory(std::move(batch));
    ASSERT_TRUE((*w)->flush().isOk());
  }
  auto db = openTraceDatabase(p, OpenMode::kReadOnly);
  ASSERT_TRUE(db.isOk());
  auto st = prepare(db->get(), "SELECT ts_ns, device, allocated, reserved FROM memory ORDER BY rowid");
  ASSERT_TRUE(st.isOk());
  int i = 0;
  for (; sqlite3_step(st->get()) == SQLITE_ROW; ++i) {
    ASSERT_EQ(sqlite3_column_int64(st->get(), 0), 1000 + i);
    ASSERT_EQ(sqlite3_column_int(st->get(), 1), i % 3);
    ASSERT_EQ(sqlite3_column_int64(st->get(), 2), int64_t{i} * 512);
    ASSERT_EQ(sqlite3_column_int64(st->get(), 3), int64_t{i} * 1024 + 7);
  }
  EXPECT_EQ(i, 100);
}

TEST(TraceWriter, StringIdsAreMappedIntoEachFile) {
  const std::string p = tempPath("strings.db");
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    // The file already holds strings from another process, with other ids.
    ASSERT_TRUE(execSql(db->get(), "INSERT INTO strings(value) VALUES ('zz_other_1'), ('zz_other_2'), ('aten::mm')").isOk());
  }
  const uint32_t mm = StringTable::global().intern("aten::mm");
  const uint32_t fresh = StringTable::global().intern("aten::only_here");
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    auto buf = (*w)->takeBuffer();
    buf->records[buf->size++] = OpRecord{1, -1, 0, 5, -1, -1, -1, 1, 0, mm};
    buf->records[buf->size++] = OpRecord{2, 1, 1, 2, -1, -1, -1, 1, 0, fresh};
    ASSERT_TRUE((*w)->submit(buf));
    OverflowRecord o;
    o.step = 3;
    o.source = "float_status";
    (*w)->addOverflow(o);
    (*w)->addMemory(MemoryRecord{10, 0, 4096, 8192});
    ASSERT_TRUE((*w)->endRun("completed", "{\"accuracy\": 0.9}").isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM ops WHERE id=1 AND name='aten::mm'"), 1);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM ops WHERE id=2 AND name='aten::only_here' AND parent_id=1"), 1);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM strings WHERE value='aten::mm'"), 1);
  EXPECT_EQ(scalar(p, "SELECT step FROM overflow_events WHERE source='float_status'"), 3);
  EXPECT_EQ(scalar(p, "SELECT reserved FROM memory"), 8192);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs WHERE results_json LIKE '%accuracy%'"), 1);
}

// A file holds the strings its rows use: strings the process interned before (an earlier
// session's op names and shapes, written into another file) do not follow it into the next one.
TEST(TraceWriter, AFileHoldsOnlyTheStringsItsRowsUse) {
  StringTable table;
  const uint32_t earlier = table.intern("aten::earlier_session_op");
  const uint32_t earlier_shapes = table.intern("[[7, 7]]");
  const uint32_t name = table.intern("aten::mm");
  const uint32_t shapes = table.intern("[[2, 3], [3, 4]]");
  const uint32_t dtypes = table.intern("float, float");
  const uint32_t kernel = table.intern("MatMul");
  const uint32_t type = table.intern("AI_CORE");
  const uint32_t unused_later = table.intern("aten::never_recorded");
  TraceWriter::Options o;
  o.strings = &table;
  const std::string first = tempPath("strings_first.db");
  const std::string second = tempPath("strings_second.db");
  for (const std::string& p : {first, second}) {
    auto w = TraceWriter::open(p, o);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    auto buf = (*w)->takeBuffer();
    OpRecord r{1, -1, 100, 50, -1, -1, -1, 1, 0, p == first ? earlier : name};
    r.shapes_id = p == first ? earlier_shapes : shapes;
    r.dtypes_id = p == first ? 0 : dtypes;
    buf->records[buf->size++] = r;
    ASSERT_TRUE((*w)->submit(buf));
    if (p == second) {
      DeviceTaskRecord t;
      t.op_id = 1;
      t.start_ns = 120;
      t.dur_ns = 10;
      t.name_id = kernel;
      t.type_id = type;
      t.shapes_id = shapes;  // already written by the op
      (*w)->addDeviceTasks({t});
    }
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  EXPECT_EQ(scalar(first, "SELECT count(*) FROM strings"), 2);
  EXPECT_EQ(scalar(first, "SELECT count(*) FROM ops WHERE name='aten::earlier_session_op' AND input_shapes='[[7, 7]]'"), 1);
  EXPECT_EQ(scalar(second, "SELECT count(*) FROM strings"), 5);
  EXPECT_EQ(scalar(second, "SELECT count(*) FROM strings WHERE value IN ('aten::earlier_session_op', '[[7, 7]]',"
                           " 'aten::never_recorded')"), 0);
  EXPECT_EQ(scalar(second, "SELECT count(*) FROM ops WHERE name='aten::mm' AND input_shapes='[[2, 3], [3, 4]]'"
                           " AND input_dtypes='float, float'"), 1);
  EXPECT_EQ(scalar(second, "SELECT count(*) FROM device_tasks t JOIN strings n ON n.id=t.name_id JOIN strings k"
                           " ON k.id=t.type_id JOIN strings s ON s.id=t.shapes_id WHERE n.value='MatMul'"
                           " AND k.value='AI_CORE' AND s.value='[[2, 3], [3, 4]]'"), 1);
  (void)unused_later;
  for (const std::string& p : {first, second}) {
    for (const char* sfx : {"", "-wal", "-shm"}) std::remove((p + sfx).c_str());
  }
}

TEST(TraceWriter, ManyRunsInOneFile) {
  const std::string p = tempPath("runs.db");
  for (int i = 0; i < 3; ++i) {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    auto id = (*w)->beginRun(info());
    ASSERT_TRUE(id.isOk());
    EXPECT_EQ(*id, i + 1);
    ASSERT_TRUE((*w)->endRun(i == 1 ? "failed" : "completed").isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(scalar(p, "SELECT id FROM runs WHERE status='failed'"), 2);
}

// Every process numbers its ops from 1: a second run in the same file must not collide with the
// first one's ids, and its parents must point at its own ops.
TEST(TraceWriter, RunsFromFreshProcessesKeepTheirOpsApart) {
  const std::string p = tempPath("ids.db");
  const uint32_t name = StringTable::global().intern("aten::linear");
  for (int run = 0; run < 2; ++run) {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    auto buf = (*w)->takeBuffer();
    buf->records[buf->size++] = OpRecord{1, -1, 0, 10, -1, -1, -1, 1, 0, name};
    buf->records[buf->size++] = OpRecord{2, 1, 1, 5, -1, -1, -1, 1, 0, name};
    buf->records[buf->size++] = OpRecord{3, 2, 2, 1, -1, -1, -1, 1, 0, name};
    ASSERT_TRUE((*w)->submit(buf));
    ASSERT_TRUE((*w)->endRun("completed").isOk());
    ASSERT_TRUE((*w)->error().isOk()) << (*w)->error().message();
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 6);
  EXPECT_EQ(scalar(p, "SELECT count(DISTINCT id) FROM op_events"), 6);
  // Each run's children point at parents of the same run, which started before them.
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events c JOIN op_events p ON p.id = c.parent_id"
                      " WHERE p.run_id = c.run_id AND p.start_ns = c.start_ns - 1"), 4);
}

// Every op keeps the id its producer gave it (plus the file's offset), whichever order buffers
// bring them in: children before their parents, a buffer in reverse order, a gap where an op was
// never written, a second run continuing after the first one's ids. The writer lets SQLite pick
// the id of a row that is the table's next one; this checks it never picks another.
TEST(TraceWriter, OpsKeepTheirIdsInAnyOrderAndAcrossRuns) {
  const std::string p = tempPath("id_order.db");
  const uint32_t name = StringTable::global().intern("aten::mm");
  auto op = [&](int64_t id, int64_t parent) { return OpRecord{id, parent, id * 10, 1, -1, -1, -1, 1, 0, name}; };
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> run1 = {
      {{3, 2}, {4, 2}, {5, 1}},            // children end first; 1 and 2 are still open
      {{2, 1}, {1, -1}, {6, -1}, {7, 6}},  // their parents, then later ops
      {{9, -1}, {8, -1}},                  // a buffer in reverse order
      {{10, -1}, {11, 10}, {13, -1}}};     // 12 never written (a dropped op)
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> run2 = {{{2, 1}, {3, 1}}, {{1, -1}, {4, -1}}};
  for (const auto* buffers : {&run1, &run2}) {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    for (const auto& ops : *buffers) {
      auto buf = (*w)->takeBuffer();
      for (const auto& [id, parent] : ops) buf->records[buf->size++] = op(id, parent);
      ASSERT_TRUE((*w)->submit(buf));
      ASSERT_TRUE((*w)->flush().isOk());  // one buffer per transaction, in this order
    }
    ASSERT_TRUE((*w)->endRun("completed").isOk());
    ASSERT_TRUE((*w)->error().isOk()) << (*w)->error().message();
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 16);
  // Run 1's ids are its producer's; run 2's continue after run 1's largest (13).
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events WHERE run_id = 1 AND id * 10 = start_ns"), 12);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events WHERE run_id = 2 AND (id - 13) * 10 = start_ns"), 4);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events WHERE id = 12"), 0);
  // Each child's parent row is the op its producer named (the parent started 10 ns per id before).
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events c JOIN op_events q ON q.id = c.parent_id"
                      " WHERE q.run_id = c.run_id AND q.start_ns = c.start_ns - 10 * (c.id - q.id)"), 8);
}

// Step boundaries hand over partial buffers; they share queue room instead of taking a buffer
// slot each, so a thousand short steps fit in a queue of two buffers.
TEST(TraceWriter, PartialBuffersShareTheQueue) {
  const std::string p = tempPath("partial.db");
  const uint32_t name = StringTable::global().intern("aten::relu");
  {
    auto w = TraceWriter::open(p, TraceWriter::Options{60000, 2});
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    auto buf = (*w)->takeBuffer();
    int64_t id = 0;
    for (int step = 0; step < 1000; ++step) {
      for (int i = 0; i < 3; ++i) buf->records[buf->size++] = OpRecord{++id, -1, id, 1, -1, -1, -1, 1, step, name};
      (*w)->submit(buf);
      ASSERT_TRUE(buf != nullptr);
    }
    EXPECT_EQ((*w)->droppedRecords(), 0u);
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 3000);
  EXPECT_EQ(scalar(p, "SELECT count(DISTINCT step) FROM op_events"), 1000);
}

}  // namespace
}  // namespace npuscope

namespace npuscope {
namespace {

// A run whose process died without ending it (SIGKILL, a crash, a full disk) ends as failed the
// next time the file is opened for writing; a run whose process still lives is left alone.
TEST(TraceWriter, RunsOfProcessesThatAreGoneEndFailedAtTheNextOpenForWriting) {
  const std::string p = tempPath("orphans.db");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int st = 0;
  waitpid(dead, &st, 0);  // reaped: no process has this pid now
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE((*w)->beginRun(info()).isOk());  // run 1: this process, still running
  }
  {
    auto db = openTraceDatabase(p, OpenMode::kReadWrite);
    ASSERT_TRUE(db.isOk());
    for (const std::string& row : std::vector<std::string>{
             "(2, 5, 0, 'running', " + std::to_string(dead) + ", '" + host + "')",     // its process is gone
          "(3, 6, 0, 'running', " + std::to_string(dead) + ", 'elsewhere')",        // another host: unknown
          "(4, 7, 0, 'running', NULL, NULL)"}) {                                   // older schema: no owner
      const Status ins = execSql(db->get(), "INSERT INTO runs(id, started_ns, wall_start_ns, status, pid, host) VALUES " + row);
      ASSERT_TRUE(ins.isOk()) << ins.message();
    }
  }
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs WHERE status='running'"), 4);  // reading changes nothing
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk());
  }
  EXPECT_EQ(scalar(p, "SELECT status='running' FROM runs WHERE id=1"), 1);
  EXPECT_EQ(scalar(p, "SELECT status='failed' FROM runs WHERE id=2"), 1);
  EXPECT_EQ(scalar(p, "SELECT instr(json_extract(results_json, '$.error'), 'pid " + std::to_string(dead) +
                          " on ') > 0 FROM runs WHERE id=2"),
            1);
  EXPECT_EQ(scalar(p, "SELECT ended_ns FROM runs WHERE id=2"), 5);  // no ops: ended when it started
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs WHERE status='running' AND id IN (3, 4)"), 2);
  EXPECT_EQ(scalar(p, "SELECT pid FROM runs WHERE id=1"), getpid());
}

// The default VFS with two counters: xSync calls, and statement journals (sub-journals) that
// spilled to a temporary file. Installed as the default while alive.
class CountingVfs {
 public:
  CountingVfs() {
    real_ = sqlite3_vfs_find(nullptr);
    vfs_ = *real_;
    vfs_.zName = "npuscope-test-counting";
    vfs_.pAppData = this;
    vfs_.xOpen = &CountingVfs::open;
    sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
    self_ = this;
  }
  ~CountingVfs() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(real_, 1);
    self_ = nullptr;
  }
  int syncs = 0, subjournals = 0;

 private:
  static int open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out_flags) {
    CountingVfs* c = static_cast<CountingVfs*>(vfs->pAppData);
    if (flags & SQLITE_OPEN_SUBJOURNAL) ++c->subjournals;
    const int rc = c->real_->xOpen(c->real_, name, f, flags, out_flags);
    if (rc == SQLITE_OK && f->pMethods != nullptr) {
      // The file's own methods, but for xSync (one copy per methods table of the real VFS).
      for (auto& m : c->methods_) {
        if (m.first == f->pMethods || m.first == nullptr) {
          if (m.first == nullptr) {
            m.first = f->pMethods;
            m.second = *f->pMethods;
            m.second.xSync = &CountingVfs::sync;
          }
          f->pMethods = &m.second;
          break;
        }
      }
    }
    return rc;
  }
  static int sync(sqlite3_file* f, int flags) {
    ++self_->syncs;
    for (auto& m : self_->methods_) {
      if (&m.second == f->pMethods) return m.first->xSync(f, flags);
    }
    return SQLITE_ERROR;
  }
  sqlite3_vfs* real_;
  sqlite3_vfs vfs_;
  std::pair<const sqlite3_io_methods*, sqlite3_io_methods> methods_[4] = {};
  static CountingVfs* self_;
};
CountingVfs* CountingVfs::self_ = nullptr;

// Writes a run of 60k ops (15 buffers) and 10k memory samples through a writer with `options`;
// `syncs`: the syncs from after the open (a new file's schema is made with its own) to the close.
void writeCountedRun(const std::string& p, const TraceWriter::Options& options, const CountingVfs& vfs, int* syncs) {
  auto w = TraceWriter::open(p, options);
  ASSERT_TRUE(w.isOk()) << w.status().message();
  const int opened = vfs.syncs;
  ASSERT_TRUE((*w)->beginRun(info()).isOk());
  const uint32_t name = StringTable::global().intern("aten::add");
  const int64_t first = scalar(p, "SELECT coalesce(max(id), 0) FROM op_events") + 1;
  for (int b = 0; b < 15; ++b) {
    auto buf = (*w)->takeBuffer();
    fillOps(*buf, first + b * 4000, 4000, name);
    (*w)->submit(buf);
  }
  std::vector<MemoryRecord> samples;
  for (int i = 0; i < 10000; ++i) samples.push_back(MemoryRecord{1000 + i, 0, uint64_t(i) * 512, uint64_t(i) * 1024});
  (*w)->addMemory(std::move(samples));
  ASSERT_TRUE((*w)->endRun("completed").isOk());
  ASSERT_TRUE((*w)->close().isOk());
  *syncs = vfs.syncs - opened;
}

// An importer's writer (sync_new_file off) writes a new file with no fsync at all, and one that
// already holds a run as any writer does; no writer's multi-row INSERTs keep statement journals
// (the writer rolls back the whole transaction on any failure: they were pure cost, 133 MB of
// temporary file for a 54 MB trace).
TEST(TraceWriter, AnImportersNewFileIsNotSyncedAndNoInsertKeepsAStatementJournal) {
  const std::string p = tempPath("unsynced.db");
  const std::string q = tempPath("synced.db");
  std::filesystem::remove(p);
  std::filesystem::remove(q);
  TraceWriter::Options importer;
  importer.sync_new_file = false;
  int first_syncs = -1, second_syncs = -1, default_syncs = -1, subjournals = -1;
  {
    CountingVfs vfs;
    writeCountedRun(p, importer, vfs, &first_syncs);
    writeCountedRun(p, importer, vfs, &second_syncs);  // the file has a run now
    writeCountedRun(q, TraceWriter::Options(), vfs, &default_syncs);
    subjournals = vfs.subjournals;
  }
  EXPECT_EQ(first_syncs, 0) << "a new file written by an importer is not synced";
  EXPECT_GT(second_syncs, 0) << "a file with runs is synced as always";
  EXPECT_GT(default_syncs, 0) << "a recording's new file is synced";
  EXPECT_EQ(subjournals, 0) << "statement journals spilled to temporary files";
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events"), 120000);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM memory"), 20000);
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM runs WHERE status='completed'"), 2);
  EXPECT_EQ(scalar(q, "SELECT count(*) FROM op_events"), 60000);
  auto db = openTraceDatabase(p, OpenMode::kReadOnly);
  ASSERT_TRUE(db.isOk());
  auto st = prepare(db->get(), "PRAGMA integrity_check");
  ASSERT_TRUE(st.isOk());
  ASSERT_EQ(sqlite3_step(st->get()), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st->get(), 0)), "ok");
}

// Every column of every op, device task and memory row as given, through both the 32-row and the
// one-row statements: values that repeat, change and turn NULL and back in irregular runs (the
// writer does not bind again a parameter that holds the value already).
TEST(TraceWriter, EveryColumnOfEveryRowIsWrittenAsGiven) {
  const std::string p = tempPath("columns.db");
  std::filesystem::remove(p);
  const uint32_t names[3] = {StringTable::global().intern("aten::mm"), StringTable::global().intern("aten::add"),
                             StringTable::global().intern("[[2, 3]]")};
  auto pick = [](int64_t i, int salt, int64_t n) { return static_cast<int64_t>((i * 2654435761u + salt * 40503u) >> 7) % n; };
  constexpr int64_t kOps = 5000, kTasks = 1000, kSamples = 1000;
  std::vector<OpRecord> ops;
  for (int64_t i = 0; i < kOps; ++i) {
    OpRecord r;
    r.id = i + 1;
    r.parent_id = pick(i, 1, 3) == 0 || i == 0 ? -1 : 1 + pick(i, 2, i);
    r.start_ns = 1000 + i * (pick(i, 3, 2) + 1);
    r.dur_ns = pick(i, 4, 3) * 50;
    r.seq_nr = pick(i, 5, 4) == 0 ? -1 : pick(i, 6, 3);
    r.device_start_ns = pick(i, 7, 3) == 0 ? -1 : 7 * pick(i, 8, 2);
    r.device_dur_ns = r.device_start_ns < 0 ? -1 : pick(i, 9, 2);
    r.thread_id = static_cast<uint64_t>(pick(i, 10, 2) + 1);
    r.step = static_cast<int32_t>(pick(i, 11, 3) - 1);
    r.name_id = names[pick(i, 12, 2)];
    r.shapes_id = pick(i, 13, 2) == 0 ? 0 : names[2];
    r.dtypes_id = pick(i, 14, 3) == 0 ? 0 : names[pick(i, 15, 3)];
    r.depth = static_cast<int16_t>(pick(i, 16, 3));
    r.device = static_cast<int8_t>(pick(i, 17, 3) - 1);
    r.is_backward = static_cast<uint8_t>(pick(i, 18, 2));
    r.host_sync = static_cast<uint8_t>(pick(i, 19, 4) == 0);
    ops.push_back(r);
  }
  std::vector<DeviceTaskRecord> tasks;
  for (int64_t i = 0; i < kTasks; ++i) {
    DeviceTaskRecord t;
    t.step = pick(i, 20, 3) - 1;
    t.op_id = pick(i, 21, 3) == 0 ? -1 : 1 + pick(i, 22, kOps);
    t.start_ns = 5 * pick(i, 23, 4);
    t.dur_ns = pick(i, 24, 2);
    t.correlation = pick(i, 25, 3) == 0 ? -1 : pick(i, 26, 2);
    t.bytes = pick(i, 27, 2) == 0 ? -1 : 64;
    t.device = static_cast<int32_t>(pick(i, 28, 2));
    t.stream = static_cast<int32_t>(pick(i, 29, 3));
    t.name_id = names[pick(i, 30, 2)];
    t.type_id = names[pick(i, 31, 2)];
    t.shapes_id = pick(i, 32, 2) == 0 ? 0 : names[2];
    t.comm_group = pick(i, 33, 3) == 0 ? "" : (pick(i, 34, 2) == 0 ? "g0" : "g1");
    tasks.push_back(t);
  }
  std::vector<MemoryRecord> samples;
  for (int64_t i = 0; i < kSamples; ++i) {
    samples.push_back(MemoryRecord{pick(i, 35, 3), static_cast<int>(pick(i, 36, 2)),
                                   static_cast<uint64_t>(pick(i, 37, 2) * 512), static_cast<uint64_t>(pick(i, 38, 2))});
  }
  {
    auto w = TraceWriter::open(p);
    ASSERT_TRUE(w.isOk()) << w.status().message();
    ASSERT_TRUE((*w)->beginRun(info()).isOk());
    // Buffers of uneven sizes, so both statements see every parameter change.
    for (size_t at = 0; at < ops.size();) {
      auto buf = (*w)->takeBuffer();
      const size_t n = std::min<size_t>(ops.size() - at, 37 + at % 101);
      for (size_t k = 0; k < n; ++k) buf->records[buf->size++] = ops[at + k];
      at += n;
      (*w)->submit(buf);
    }
    for (size_t at = 0; at < tasks.size(); at += 45) {
      (*w)->addDeviceTasks(std::vector<DeviceTaskRecord>(tasks.begin() + static_cast<std::ptrdiff_t>(at),
                                                         tasks.begin() + static_cast<std::ptrdiff_t>(std::min(at + 45, tasks.size()))));
    }
    for (size_t at = 0; at < samples.size(); at += 50) {
      (*w)->addMemory(std::vector<MemoryRecord>(samples.begin() + static_cast<std::ptrdiff_t>(at),
                                                samples.begin() + static_cast<std::ptrdiff_t>(std::min(at + 50, samples.size()))));
    }
    (*w)->addMemory(MemoryRecord{77, 1, 3, 4});  // one on its own
    ASSERT_TRUE((*w)->endRun("completed").isOk());
  }
  auto db = openTraceDatabase(p, OpenMode::kReadOnly);
  ASSERT_TRUE(db.isOk());
  auto nullable = [](sqlite3_stmt* st, int col) { return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col); };
  auto text = [](sqlite3_stmt* st, int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  std::map<std::string, uint32_t> id_of = {{"aten::mm", names[0]}, {"aten::add", names[1]}, {"[[2, 3]]", names[2]}};
  auto st = prepare(db->get(), "SELECT id, parent_id, start_ns, dur_ns, seq_nr, device_start_ns, device_dur_ns, thread_id, step,"
                               " name, input_shapes, input_dtypes, depth, device, is_backward, run_id FROM ops ORDER BY id");
  ASSERT_TRUE(st.isOk());
  size_t n = 0;
  for (; sqlite3_step(st->get()) == SQLITE_ROW; ++n) {
    ASSERT_LT(n, ops.size());
    const OpRecord& r = ops[n];
    sqlite3_stmt* q = st->get();
    EXPECT_EQ(sqlite3_column_int64(q, 0), r.id);
    EXPECT_EQ(nullable(q, 1), r.parent_id) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 2), r.start_ns) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 3), r.dur_ns) << r.id;
    EXPECT_EQ(nullable(q, 4), r.seq_nr) << r.id;
    EXPECT_EQ(nullable(q, 5), r.device_start_ns) << r.id;
    EXPECT_EQ(nullable(q, 6), r.device_dur_ns) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 7), static_cast<int64_t>(r.thread_id)) << r.id;
    EXPECT_EQ(nullable(q, 8), r.step) << r.id;
    EXPECT_EQ(id_of[text(q, 9)], r.name_id) << r.id;
    EXPECT_EQ(r.shapes_id == 0 ? "" : "[[2, 3]]", text(q, 10)) << r.id;
    EXPECT_EQ(r.dtypes_id == 0 ? 0u : r.dtypes_id, text(q, 11).empty() ? 0u : id_of[text(q, 11)]) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 12), r.depth) << r.id;
    EXPECT_EQ(r.device < 0 ? "" : "npu:" + std::to_string(r.device), text(q, 13)) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 14), r.is_backward) << r.id;
    EXPECT_EQ(sqlite3_column_int64(q, 15), 1) << r.id;
  }
  EXPECT_EQ(n, ops.size());
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events WHERE host_sync = 1"),
            std::count_if(ops.begin(), ops.end(), [](const OpRecord& r) { return r.host_sync != 0; }));
  EXPECT_EQ(scalar(p, "SELECT count(*) FROM op_events WHERE host_sync IS NOT NULL AND host_sync <> 1"), 0);

  auto ts = prepare(db->get(), "SELECT t.step, t.op_id, t.start_ns, t.dur_ns, t.correlation, t.bytes, t.device, t.stream,"
                               " n.value, y.value, s.value, t.comm_group, t.run_id FROM device_tasks t"
                               " JOIN strings n ON n.id = t.name_id JOIN strings y ON y.id = t.type_id"
                               " LEFT JOIN strings s ON s.id = t.shapes_id ORDER BY t.id");
  ASSERT_TRUE(ts.isOk());
  n = 0;
  for (; sqlite3_step(ts->get()) == SQLITE_ROW; ++n) {
    ASSERT_LT(n, tasks.size());
    const DeviceTaskRecord& t = tasks[n];
    sqlite3_stmt* q = ts->get();
    EXPECT_EQ(nullable(q, 0), t.step) << n;
    EXPECT_EQ(nullable(q, 1), t.op_id) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 2), t.start_ns) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 3), t.dur_ns) << n;
    EXPECT_EQ(nullable(q, 4), t.correlation) << n;
    EXPECT_EQ(nullable(q, 5), t.bytes) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 6), t.device) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 7), t.stream) << n;
    EXPECT_EQ(id_of[text(q, 8)], t.name_id) << n;
    EXPECT_EQ(id_of[text(q, 9)], t.type_id) << n;
    EXPECT_EQ(t.shapes_id == 0 ? "" : "[[2, 3]]", text(q, 10)) << n;
    EXPECT_EQ(text(q, 11), t.comm_group) << n;
    EXPECT_EQ(sqlite3_column_type(q, 11) == SQLITE_NULL, t.comm_group.empty()) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 12), 1) << n;
  }
  EXPECT_EQ(n, tasks.size());

  samples.push_back(MemoryRecord{77, 1, 3, 4});
  auto ms = prepare(db->get(), "SELECT ts_ns, device, allocated, reserved, run_id FROM memory ORDER BY rowid");
  ASSERT_TRUE(ms.isOk());
  n = 0;
  for (; sqlite3_step(ms->get()) == SQLITE_ROW; ++n) {
    ASSERT_LT(n, samples.size());
    const MemoryRecord& m = samples[n];
    sqlite3_stmt* q = ms->get();
    EXPECT_EQ(sqlite3_column_int64(q, 0), m.ts_ns) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 1), m.device) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 2), static_cast<int64_t>(m.allocated)) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 3), static_cast<int64_t>(m.reserved)) << n;
    EXPECT_EQ(sqlite3_column_int64(q, 4), 1) << n;
  }
  EXPECT_EQ(n, samples.size());
}

}  // namespace
}  // namespace npuscope
