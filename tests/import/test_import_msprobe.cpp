// msprobe dumps read (npuscope/import/msprobe.h): the real sample's entries, names and statistics
// exactly as its dump.json holds them, Python's NaN / Infinity tokens, the folder layouts msprobe
// writes, both stack.json forms, construct.json, and bad input refused in one line.
#include <cmath>
#include <fstream>
#include <sstream>

#include "import_fixture.h"
#include "npuscope/import/msprobe.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope::import::test {
namespace {

const std::string kSample = std::string(NPUSCOPE_MSPROBE) + "/pytorch_mix";

std::string readAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const TensorDumpRecord* find(const MsprobeDump& d, const std::string& entry, const std::string& arg) {
  for (const auto& t : d.tensors)
    if (t.op_name == entry && t.arg == arg) return &t;
  return nullptr;
}

TEST(Msprobe, SampleEntriesAndStatisticsAsWritten) {
  MsprobeDump d;
  ASSERT_TRUE(parseMsprobeDump(readAll(kSample + "/dump.json"), "dump.json", 0, &d).isOk());
  EXPECT_EQ(d.task, "statistics");
  EXPECT_EQ(d.level, "mix");
  EXPECT_EQ(d.framework, "pytorch");
  ASSERT_EQ(d.entries.size(), 12u);
  EXPECT_EQ(d.entries.front().name, "Tensor.__add__.0.forward") << "the file's order, not sorted";
  EXPECT_EQ(d.entries.back().name, "NPU.npu_fusion_attention.0.backward");
  // Values typed in from the sample's dump.json.
  const TensorDumpRecord* out = find(d, "Distributed.all_reduce.0.forward", "output.0");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->dtype, "bfloat16");
  EXPECT_EQ(out->shape, "[1, 4096, 6144]");
  EXPECT_EQ(out->max, 2.6875);
  EXPECT_EQ(out->min, -2.640625);
  EXPECT_EQ(out->mean, 0.000316619873046875);
  EXPECT_EQ(out->l2norm, 2512.0);
  EXPECT_EQ(out->op_type, "Distributed.all_reduce");
  // A backward entry's "input" / "output" lists; None outputs are left out, positions kept.
  const TensorDumpRecord* g = find(d, "NPU.npu_fusion_attention.0.backward", "output.2");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->io, "output");
  EXPECT_EQ(g->max, 2.181529998779297e-05);
  EXPECT_EQ(find(d, "NPU.npu_fusion_attention.0.backward", "output.3"), nullptr) << "null: no row";
  // A keyword argument by its name; a scalar by its value; a bool tensor's Max / Min.
  EXPECT_NE(find(d, "Module.module.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0",
                 "input.rotary_pos_emb"),
            nullptr);
  const TensorDumpRecord* one = find(d, "Tensor.__add__.0.forward", "input.1");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->dtype, "int");
  EXPECT_EQ(one->max, 1);
  const TensorDumpRecord* mask = find(d, "Tensor.__or__.0.forward", "input.1");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->dtype, "bool");
  EXPECT_EQ(mask->max, 1);
  EXPECT_EQ(mask->min, 0);
  EXPECT_TRUE(std::isnan(mask->mean)) << "null Mean of a bool tensor stays absent";
  EXPECT_EQ(msprobeOpType("Module.layer1.0.conv1.Conv2d.forward.0"), "Module.Conv2d");
  EXPECT_EQ(msprobeOpType("Functional.conv2d.12.backward"), "Functional.conv2d");
}

TEST(Msprobe, PythonNonFiniteTokensAreStatistics) {
  const std::string text = R"({"task": "statistics", "level": "L1", "framework": "pytorch", "data": {
    "Torch.exp.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [2],
      "Max": 12.0, "Min": 1.0, "Mean": 6.5, "Norm": 12.04, "requires_grad": false}], "input_kwargs": {},
      "output": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [2], "Max": Infinity,
      "Min": -Infinity, "Mean": NaN, "Norm": Infinity, "requires_grad": false, "note": "NaN Infinity"}]},
    "Torch.log.0.forward": {"input_args": [], "input_kwargs": {}, "output": [{"type": "torch.Tensor",
      "dtype": "torch.float32", "shape": [1], "Max": NaN, "Min": NaN, "Mean": NaN, "Norm": NaN}]}}})";
  MsprobeDump d;
  ASSERT_TRUE(parseMsprobeDump(text, "dump.json", 3, &d).isOk());
  const TensorDumpRecord* inf = find(d, "Torch.exp.0.forward", "output.0");
  ASSERT_NE(inf, nullptr);
  EXPECT_EQ(inf->max, INFINITY);
  EXPECT_EQ(inf->min, -INFINITY);
  EXPECT_TRUE(std::isnan(inf->mean));
  EXPECT_EQ(inf->step, 3);
  EXPECT_EQ(inf->nan_count, 0) << "max and min are no NaN: torch's max would be";
  EXPECT_EQ(inf->inf_count, 1) << "at least one";
  const TensorDumpRecord* finite = find(d, "Torch.exp.0.forward", "input.0");
  EXPECT_EQ(finite->nan_count, 0);
  EXPECT_EQ(finite->inf_count, 0);
  const TensorDumpRecord* nan = find(d, "Torch.log.0.forward", "output.0");
  ASSERT_NE(nan, nullptr);
  EXPECT_EQ(nan->nan_count, 1);
}

TEST(Msprobe, StacksInBothFormsAndTheModuleTree) {
  MsprobeDump d;
  ASSERT_TRUE(parseMsprobeDump(readAll(kSample + "/dump.json"), "dump.json", -1, &d).isOk());
  ASSERT_TRUE(applyMsprobeStacks(readAll(kSample + "/stack.json"), "stack.json", &d).isOk());
  ASSERT_TRUE(applyMsprobeConstruct(readAll(kSample + "/construct.json"), "construct.json", &d).isOk());
  const DumpEntryRecord* cos = nullptr;
  for (const auto& e : d.entries)
    if (e.name == "Torch.cos.0.forward") cos = &e;
  ASSERT_NE(cos, nullptr);
  EXPECT_EQ(cos->parent, "Module.module.module.language_model.encoder.layers.0.self_attention.ParallelAttention.forward.0");
  EXPECT_NE(cos->stack.find("cos_ = torch.cos(freqs)"), std::string::npos) << cos->stack;
  // msprobe's current form: {"0": [[entries sharing the stack], [frames]]}.
  MsprobeDump n;
  n.entries.push_back({-1, "Functional.relu.0.forward", "", ""});
  n.entries.push_back({-1, "Functional.relu.1.forward", "", ""});
  ASSERT_TRUE(applyMsprobeStacks(R"J({"0": [["Functional.relu.0.forward", "Functional.relu.1.forward"],
      ["File net.py, line 3, in forward, \n return F.relu(x)"]]})J", "stack.json", &n).isOk());
  EXPECT_EQ(n.entries[1].stack, "File net.py, line 3, in forward, \n return F.relu(x)");
}

TEST_F(ImportTest, MsprobeFolderLayouts) {
  const std::string body = R"({"task": "statistics", "level": "L1", "framework": "pytorch", "data": {
      "Functional.relu.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32",
      "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}],
      "input_kwargs": {}, "output": []}}})";
  for (const char* p : {"dump/step0/rank0/dump.json", "dump/step0/rank1/dump.json", "dump/step2/rank0/dump.json",
                        "dump/step2/rank1/dump.json"}) {
    write(p, body);
  }
  write("single/step0/rank/dump.json", body);
  auto tree = msprobeFolders(path("dump"));
  ASSERT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree[0].rank, 0);
  EXPECT_EQ(tree[0].step, 0);
  EXPECT_EQ(tree[1].rank, 0);
  EXPECT_EQ(tree[1].step, 2);
  EXPECT_EQ(tree[3].rank, 1);
  EXPECT_EQ(msprobeFolders(path("dump/step2")).size(), 2u) << "a step folder of ranks";
  auto one = msprobeFolders(path("dump/step2/rank1"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].step, 2);
  EXPECT_EQ(one[0].rank, 1);
  auto single = msprobeFolders(path("single"));
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].rank, -1) << "msprobe's `rank` folder outside a job";
  EXPECT_TRUE(msprobeFolders(kTraces).empty()) << "a folder of traces is no msprobe dump";

  // One run per rank, its steps inside.
  const std::string db = path("job.db");
  auto s = importPath(path("dump"), db);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  ASSERT_EQ(s->runs.size(), 2u);
  EXPECT_EQ(s->runs[1].rank, 1);
  EXPECT_EQ(s->runs[1].steps, 2);
  EXPECT_EQ(q(db, "SELECT count(*) FROM runs WHERE source='msprobe' AND world_size=2"), 2);
  EXPECT_EQ(q(db, "SELECT count(DISTINCT step) FROM tensor_dumps"), 2);
  EXPECT_EQ(*detectFormat(path("dump")), "msprobe");
}

TEST_F(ImportTest, MsprobeSampleImportsWithModulesAndStacks) {
  const std::string db = path("m.db");
  auto s = importPath(kSample, db);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  ASSERT_EQ(s->runs.size(), 1u);
  EXPECT_EQ(s->runs[0].dump_entries, 12);
  auto reader = TraceReader::open(db);
  ASSERT_TRUE(reader.isOk());
  auto dumps = (*reader)->tensorDumps(s->runs[0].run_id);
  ASSERT_TRUE(dumps.isOk());
  const TensorDumpInfo* cos = nullptr;
  for (const auto& d : *dumps)
    if (d.op_name == "Torch.cos.0.forward" && d.argName() == "output.0") cos = &d;
  ASSERT_NE(cos, nullptr);
  EXPECT_EQ(cos->dtype, "float32");
  auto entries = (*reader)->dumpEntries(s->runs[0].run_id);
  ASSERT_TRUE(entries.isOk());
  ASSERT_EQ(entries->size(), 12u);
  EXPECT_EQ((*entries)[3].name, "Distributed.all_reduce.0.forward");
  EXPECT_FALSE((*entries)[3].parent.empty());
  EXPECT_FALSE((*entries)[3].stack.empty());
}

TEST_F(ImportTest, MsprobeBadInputRefusedInOneLine) {
  write("notjson/dump.json", "{\"task\": \"statistics\", \"data\": {");
  expectRefused(path("notjson"), "not valid JSON");
  write("nodata/dump.json", "{\"task\": \"statistics\"}");
  expectRefused(path("nodata"), "no \"data\" object");
  write("badentry/dump.json", "{\"data\": {\"Functional.relu.0.forward\": 3}}");
  expectRefused(path("badentry"), "Functional.relu.0.forward");
  write("badstack/dump.json", "{\"data\": {}}");
  write("badstack/stack.json", "[1, 2");
  expectRefused(path("badstack"), "stack.json");
}

}  // namespace
}  // namespace npuscope::import::test
