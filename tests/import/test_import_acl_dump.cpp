// Ascend ACL dump folders (acl_dump.h): a real NPU's layout ({time}/{device}/{model}/{model_id}/
// {step}/) written with the dump-file writer, read back as one run per device whose tensors keep
// their bytes, step and statistics (checked against sums worked out here), and a damaged file
// refused in one line naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "import_fixture.h"
#include "npuscope/dumper/dump_file.h"
#include "npuscope/import/acl_dump.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::import::test {
namespace {

// One op's file: input x (float32 [2, 3]) and output y = 2x (float32 [2, 3]).
void writeOp(const std::string& dir, const std::string& type, const std::string& name, uint64_t task, uint64_t ts,
             const std::vector<float>& x) {
  std::filesystem::create_directories(dir);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = 2 * x[i];
  dumper::DumpFileTensor in, out;
  in.dtype = out.dtype = tensor::DType::kFloat32;
  in.shape = out.shape = {2, 3};
  in.data = reinterpret_cast<const uint8_t*>(x.data());
  out.data = reinterpret_cast<const uint8_t*>(y.data());
  in.size = out.size = x.size() * sizeof(float);
  const std::string file = dir + "/" + dumper::dumpFileName(type, name, task, 0, ts);
  ASSERT_TRUE(dumper::writeDumpFile(file, name, ts, {in}, {out}).isOk());
}

TEST_F(ImportTest, AclDumpFolderOfARealNpuLayout) {
  const std::string root = path("acl_dump");
  const std::string time = root + "/20261128093000";
  // Device 0: steps 3 and 4 (step folders), two ops each; device 1: step 3, one op.
  writeOp(time + "/0/model/1/3", "MatMul", "Default_MatMul-op1", 1, 100, {1, 2, 3, 4, 5, 6});
  writeOp(time + "/0/model/1/3", "Relu", "Default_Relu-op2", 2, 101, {-1, 0, 1, 2, -3, 4});
  writeOp(time + "/0/model/1/4", "MatMul", "Default_MatMul-op1", 3, 200, {6, 5, 4, 3, 2, 1});
  writeOp(time + "/0/model/1/4", "Relu", "Default_Relu-op2", 4, 201, {0, 0, 0, 0, 0, 1});
  writeOp(time + "/1/model/1/3", "MatMul", "Default_MatMul-op1", 1, 100, {1, 1, 1, 1, 1, 1});
  write("acl_dump/mapping.csv", "not,a,dump,file\n");  // other files are left alone
  const std::vector<AclDumpFile> files = aclDumpFiles(root);
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].device, 0);
  EXPECT_EQ(files[0].step, 3);
  EXPECT_EQ(files[0].op_type, "MatMul");
  EXPECT_EQ(files[4].device, 1);

  const std::string db = path("acl.db");
  auto s = importPath(root, db);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  ASSERT_EQ(s->runs.size(), 2u);
  EXPECT_EQ(s->runs[0].source, "acl_dump");
  EXPECT_EQ(s->runs[0].dump_entries, 4);
  EXPECT_EQ(s->runs[0].dump_tensors, 8);
  EXPECT_EQ(s->runs[0].steps, 2);
  EXPECT_EQ(s->runs[0].rank, 0);
  EXPECT_EQ(s->runs[1].rank, 1);
  EXPECT_EQ(q(db, "SELECT count(*) FROM tensor_dumps WHERE run_id = 1 AND step = 4"), 4);
  EXPECT_EQ(qs(db, "SELECT op_type || ' ' || io || ' ' || shape || ' ' || dtype FROM tensor_dumps WHERE run_id = 1 "
                   "AND step = 3 AND op_name = 'Default_Relu-op2' AND io = 'input'"),
            "Relu input [2, 3] float32");
  // The statistics of Relu's step-3 input {-1, 0, 1, 2, -3, 4}: min -3, max 4, mean 1/2,
  // norm sqrt(1 + 0 + 1 + 4 + 9 + 16) = sqrt(31).
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto dumps = (*reader)->tensorDumps(s->runs[0].run_id);
  ASSERT_TRUE(dumps.isOk());
  const TensorDumpInfo* relu = nullptr;
  for (const TensorDumpInfo& d : *dumps) {
    if (d.step == 3 && d.op_name == "Default_Relu-op2" && d.io == "input") relu = &d;
  }
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(*relu->min, -3.0);
  EXPECT_EQ(*relu->max, 4.0);
  EXPECT_DOUBLE_EQ(*relu->mean, 0.5);
  EXPECT_DOUBLE_EQ(*relu->l2norm, std::sqrt(31.0));
  // Its bytes, as written.
  auto data = (*reader)->tensorDumpData(relu->id);
  ASSERT_TRUE(data.isOk()) << data.status().message();
  auto values = tensor::decodeDumpValues(data->bytes, data->zstd_frame, tensor::DType::kFloat32);
  ASSERT_TRUE(values.isOk());
  EXPECT_EQ(*values, (std::vector<double>{-1, 0, 1, 2, -3, 4}));

  // A file cut short: one line naming it; nothing of that device's run is kept as completed.
  const std::string victim = files[2].path;
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) - 3);
  auto bad = importPath(root, path("bad.db"));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find(victim), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(q(path("bad.db"), "SELECT count(*) FROM runs WHERE status = 'completed'"), 0);
}

}  // namespace
}  // namespace npuscope::import::test
