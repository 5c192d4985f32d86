#include "npuscope/profiler/msprobe_rows.h"

#include "npuscope/dumper/dumper.h"
#include "npuscope/import/msprobe.h"
#include "npuscope/profiler/session.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::profiler {

StatusOr<MsprobeRows> addMsprobeStep(MsprobeStep&& step) {
  RecordingSession* session = RecordingSession::active();
  TraceWriter* writer = session != nullptr ? session->writer() : nullptr;
  if (writer == nullptr) return failedPrecondition("msprobe rows: no recording is active (npuscope.profile)");
  import::MsprobeDump dump;
  RETURN_IF_ERROR(import::parseMsprobeDump(step.dump_json, "dump.json", step.step, &dump));
  if (!step.stack_json.empty()) RETURN_IF_ERROR(import::applyMsprobeStacks(step.stack_json, "stack.json", &dump));
  if (!step.construct_json.empty()) {
    RETURN_IF_ERROR(import::applyMsprobeConstruct(step.construct_json, "construct.json", &dump));
  }
  MsprobeRows out;
  for (DumpEntryRecord& e : dump.entries) {
    const auto it = step.op_of_entry.find(e.name);
    e.op_id = it != step.op_of_entry.end() ? it->second : -1;
    if (e.op_id >= 0) ++out.linked_entries;
  }
  // Payloads by file name; a host tensor held by several names is stored once (keys: the order
  // of first use, high bit set so they never meet the op dumper's content-hash keys in a step).
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : step.tensors) by_name.emplace(name, &t);
  std::unordered_map<const void*, uint64_t> key_of;
  for (TensorDumpRecord& r : dump.tensors) {
    const auto e = step.op_of_entry.find(r.op_name);
    r.op_id = e != step.op_of_entry.end() ? e->second : -1;
    if (by_name.empty()) continue;
    const auto t = by_name.find(r.op_name + "." + r.arg + ".pt");
    if (t == by_name.end()) continue;
    const void* storage = t->second->data_ptr();
    const auto [k, first] = key_of.emplace(storage, (uint64_t{1} << 63) | (key_of.size() + 1));
    if (!first) {
      r.same_data_as = k->second;
      continue;
    }
    if (dumper::tensorPayload(*t->second, &r.data)) {
      r.payload_key = k->second;
      ++out.payloads;
    } else {
      key_of.erase(k);
    }
  }
  out.entries = static_cast<int64_t>(dump.entries.size());
  out.tensors = static_cast<int64_t>(dump.tensors.size());
  writer->addDumpEntries(std::move(dump.entries));
  writer->addTensorDumps(std::move(dump.tensors));
  return out;
}

}  // namespace npuscope::profiler
