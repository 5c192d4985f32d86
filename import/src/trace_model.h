// What an importer makes of a trace before writing it: compact event records, the source's
// process and thread names, flows and memory samples; finish() classifies the events (host op,
// device task, step, skipped), nests host ops per thread, links device tasks to the host op that
// launched them and writes one run through a TraceWriter. Knows no JSON library.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "npuscope/store/records.h"
#include "npuscope/store/status.h"
#include "npuscope/store/string_table.h"
#include "npuscope/import/import.h"

namespace npuscope {
class TraceWriter;
}

namespace npuscope::import {

// One event as read, strings still views into the parser's buffer (valid during addEvent).
struct EventFields {
  std::string_view ph, cat, name, bp, id;   // id: a flow's id as text
  std::string_view pid_text, tid_text;      // pid / tid when the source wrote strings
  int64_t pid = 0, tid = 0;
  bool pid_is_number = true, tid_is_number = true;
  std::optional<int64_t> ts_ns, dur_ns;
  // args (only those the mapping uses)
  std::string_view input_dims, input_types;  // JSON text of Kineto's arrays, or torch_npu's ";\r\n" lists
  bool dims_are_json = false, types_are_json = false;
  std::optional<int64_t> seq, correlation, connection, queue_correlation, external, device, stream, physic_stream;
  std::optional<int64_t> device_type, device_id, total_allocated, total_reserved, bytes, count;
  std::optional<int64_t> allocated, reserved;  // npuscope's own memory counters ("Memory npu:N")
  std::string_view task_type, data_type, group, arg_name;  // arg_name: args.name of M events
  // torch_npu's details of a compute task (COMPUTE_TASK_INFO): its op type (TransData) and
  // accelerator core (AI_VECTOR_CORE); empty or N/A when unknown. See TraceModel::addTaskDetail.
  std::string_view op_type, core_type;
  // torch_npu's db: the connection ids of the launches an op holds (CONNECTION_IDS). A device task
  // with one of them belongs to the op when no host call carries the id itself.
  const std::vector<int64_t>* launch_ids = nullptr;
};

// A row of torch_npu's kernel_details.csv: more about the device task of this name that starts
// within a microsecond of `start_ns`.
struct TaskDetail {
  std::string name;
  int64_t start_ns = 0;
  std::string op_type, core_type, shapes;  // shapes as torch_npu writes them ("32,3,224,224;64")
};

class TraceModel {
 public:
  // Names are interned into `strings`, which outlives the model and is the table its writer
  // is opened with (TraceWriter::Options::strings): one per import, so that what one import
  // read neither stays in the process nor reaches the next import's file.
  TraceModel(std::string source, std::string path, StringTable& strings)
      : source_(std::move(source)), path_(std::move(path)), strings_(strings) {}

  void addEvent(const EventFields& e);
  // Names a process or thread (`what`: process_name / thread_name), as a trace's M events do.
  void addName(int64_t pid, int64_t tid, std::string_view what, std::string_view value) {
    EventFields m;
    m.ph = "M";
    m.name = what;
    m.pid = pid;
    m.tid = tid;
    m.arg_name = value;
    addEvent(m);
  }
  // A torch_npu memory_record.csv sample (bytes; device index).
  void addMemory(const MemoryRecord& m) { memory_.push_back(m); }
  // A torch_npu operator_memory.csv allocation (alloc_ns, free_ns, size, owner: the op's name);
  // the pool's event numbers are given when the run is written, in time order.
  void addMemoryBlock(const MemoryBlockRecord& b) { blocks_.push_back(b); }
  const std::vector<MemoryBlockRecord>& memoryBlocks() const { return blocks_; }
  // A torch_npu npu_module_mem.csv sample: what a component of the device software reserved.
  void addMemoryComponent(MemoryComponentRecord c) { components_.push_back(std::move(c)); }
  const std::vector<MemoryComponentRecord>& memoryComponents() const { return components_; }
  // A step known from elsewhere (torch_npu's STEP_TIME); used when no host op is ProfilerStep#N.
  void addStep(int64_t n, int64_t start_ns, int64_t end_ns) { given_steps_.push_back({n, start_ns, end_ns}); }
  // Matched to a device task by classify(); the task takes its type and input shapes. Rows that
  // match no task are counted in one note, `what` naming their source.
  void addTaskDetail(const TaskDetail& d, const std::string& what);
  // The run's metadata, as {"source": {...}}.
  void setMetadata(std::string json) { metadata_json_ = std::move(json); }
  void setRank(int64_t rank, int64_t world_size) { rank_ = rank, world_size_ = world_size; }
  void setDefaultDevice(int32_t device) { default_device_ = device; }
  // Unix ns of trace time 0 when the source's time stamps are relative (Kineto's baseTimeNanoseconds).
  void setTimeBase(int64_t base_ns) { time_base_ns_ = base_ns; }
  void note(const std::string& n) { extra_notes_.push_back(n); }
  // Counts an event left out; the summary names each kind once with its count.
  void skip(const std::string& what);

  // Sorts the events into host ops, device tasks and skipped ones; an error when nothing is left
  // to import. write() calls it when it was not called before.
  Status classify();
  // Writes the run; fills `summary`.
  Status write(TraceWriter& writer, RunSummary* summary);

  int64_t rank() const { return rank_; }

 private:
  // One kept event: 64 bytes; rarer fields live in side tables keyed by the event's index.
  struct Raw {
    int64_t ts_ns = 0, dur_ns = 0;
    int64_t link = -1, external = -1;  // correlation / connection_id, External id
    uint32_t lane = 0;                 // lanes_ index: (pid, tid)
    int32_t seq = -1;
    int32_t stream = -1;
    uint32_t name_id = 0, shapes_id = 0, dtypes_id = 0, type_id = 0;
    uint16_t cat = 0;                  // cats_ index, 0: none
    int16_t device = -1;
  };
  struct FlowStart {
    int64_t link = 0, ts_ns = 0;
    uint32_t lane = 0;
  };

  uint32_t laneOf(int64_t pid, int64_t tid);
  uint16_t catOf(std::string_view cat);
  // StringTable id of `raw` after `make` (normalisation), cached by the raw text: most events
  // repeat a few names, shape lists and type lists.
  template <class Make>
  uint32_t cachedId(int kind, std::string_view raw, Make make);
  int64_t sideInt(const std::unordered_map<uint32_t, int64_t>& m, size_t i) const {
    auto it = m.find(static_cast<uint32_t>(i));
    return it == m.end() ? -1 : it->second;
  }
  int64_t numericId(std::string_view text);
  // A device task's stored type: its op type when known, else its accelerator core, else the
  // source's task type.
  uint32_t taskTypeId(std::string_view op_type, std::string_view core_type, uint32_t task_type);
  void matchTaskDetails();

  // write()'s phases, in order (trace_model.cpp).
  struct Nesting;
  struct Launches;
  struct Step;
  Nesting nestHostOps();
  std::vector<Step> findSteps() const;
  static int64_t stepAt(const std::vector<Step>& steps, int64_t t);
  Launches linkLaunches(const Nesting& nest);
  int64_t innermostAt(const Nesting& nest, int64_t tid, int64_t ts) const;
  int64_t launchOf(Launches& launches, const Nesting& nest, const Raw& task) const;
  int64_t launchingOp(const Launches& launches, const Nesting& nest, int64_t i) const;
  StatusOr<int64_t> beginImportedRun(TraceWriter& writer, RunSummary* summary);
  void writeMemorySamples(TraceWriter& writer, RunSummary* summary);
  void writeHostOps(TraceWriter& writer, const Nesting& nest, const std::vector<Step>& steps, RunSummary* summary);
  void writeDeviceTasks(TraceWriter& writer, const Nesting& nest, Launches& launches, const std::vector<Step>& steps,
                        RunSummary* summary);
  Status endImportedRun(TraceWriter& writer, RunSummary* summary, int64_t last);
  int64_t tidOf(const Raw& r) const { return lanes_[r.lane].second; }
  const std::string& catOfEvent(size_t i) const { return cats_[events_[i].cat]; }

  std::string source_, path_;
  StringTable& strings_;
  std::string metadata_json_ = "{}";
  int64_t rank_ = -1, world_size_ = -1;
  int32_t default_device_ = 0;
  int64_t time_base_ns_ = 0;
  std::deque<Raw> events_;  // no reallocation peaks while it grows
  std::vector<MemoryRecord> memory_;
  std::vector<MemoryComponentRecord> components_;
  std::vector<MemoryBlockRecord> blocks_;
  struct Step {
    int64_t n, start, end;
  };
  std::vector<Step> given_steps_;
  struct Detail {
    int64_t start_ns;
    uint32_t name_id, type_id_op, type_id_core, shapes_id;
  };
  std::vector<Detail> details_;
  std::string details_source_;
  std::vector<std::pair<int64_t, uint32_t>> op_links_;  // (connection id, event index) from launch_ids
  std::unordered_map<int64_t, std::string> process_names_;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  std::unordered_map<std::string, int64_t> text_ids_;       // string pids / tids -> numbers
  std::vector<FlowStart> flow_starts_;  // launch flows (ac2g, HostToDevice)
  std::vector<std::pair<int64_t, int64_t>> lanes_;  // (pid, tid)
  std::map<std::pair<int64_t, int64_t>, uint32_t> lane_ids_;
  uint32_t last_lane_ = UINT32_MAX;
  std::pair<int64_t, int64_t> last_lane_key_;
  std::vector<std::string> cats_{""};
  std::unordered_map<std::string, uint16_t> cat_ids_;
  uint16_t last_cat_ = 0;
  struct Cached {
    uint32_t id;
    uint32_t text;  // cache_texts_ index
  };
  std::unordered_multimap<uint64_t, Cached> cache_;
  std::vector<std::string> cache_texts_;
  std::unordered_map<uint32_t, int64_t> queue_of_, bytes_of_;  // event index -> task-queue id / bytes
  std::unordered_map<uint32_t, uint32_t> group_of_;            // event index -> strings_ id
  std::map<std::string, int64_t> skipped_;                  // what was skipped -> count
  std::vector<std::string> extra_notes_;
  int64_t memory_events_cpu_ = 0;
  enum Kind : uint8_t { kHost, kTask, kCommTask, kSkip };
  bool classified_ = false;
  std::vector<uint8_t> kind_;                           // per event

};

}  // namespace npuscope::import
