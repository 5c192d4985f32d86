#include "npuscope/gui/timeline_data.h"

#include "npuscope/store/op_aggregator.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <limits>
#include <map>
#include <thread>
#include <unordered_map>

namespace npuscope::gui {

// A named namespace, not an anonymous one: TimelineLoader (a friend of TimelineData, so of
// external linkage) holds LocalStrings and WorkItem, and GCC warns about members of internal
// linkage in it (-Wsubobject-linkage).
namespace timeline_detail {

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

// Per worker, the file's string ids (the same for every reader of the file) to the worker's
// string indices: a dense array for the small ids a file has, a hash map past them. A string is
// copied once, when its id is first met; nothing is hashed by content.
class LocalStrings {
 public:
  uint32_t id(int64_t file_id, std::string_view s) {
    if (file_id <= 0 || s.empty()) return 0;
    if (file_id < kDense) {
      const auto i = static_cast<size_t>(file_id);
      if (i >= dense_.size()) dense_.resize(std::max(i + 1, dense_.size() * 2), 0);
      uint32_t& d = dense_[i];
      if (d == 0) d = add(file_id, s);
      return d;
    }
    auto [it, fresh] = sparse_.try_emplace(file_id, 0);
    if (fresh) it->second = add(file_id, s);
    return it->second;
  }
  std::vector<std::string> values_{std::string()};
  std::vector<int64_t> file_ids_{0};  // the file's id of each value

 private:
  static constexpr int64_t kDense = int64_t{1} << 22;
  uint32_t add(int64_t file_id, std::string_view s) {
    values_.emplace_back(s);
    file_ids_.push_back(file_id);
    return static_cast<uint32_t>(values_.size() - 1);
  }
  std::vector<uint32_t> dense_;
  std::unordered_map<int64_t, uint32_t> sparse_;
};

struct WorkItem {
  size_t lane = 0;
  TimeWindow window;
  bool enclosing = false;  // the ops enclosing window.begin_ns that start before it
  int worker = -1;
  std::vector<Slice> slices;
  Status status;
};

// Puts `all` (in start order) into the lane grouped by depth: a stable counting sort.
void fillByDepth(Lane& lane, const std::vector<Slice>& all) {
  int max_depth = -1;
  for (const Slice& s : all) max_depth = std::max<int>(max_depth, s.depth);
  lane.depth_begin.assign(static_cast<size_t>(max_depth + 2), 0);
  for (const Slice& s : all) ++lane.depth_begin[static_cast<size_t>(s.depth) + 1];
  for (size_t d = 1; d < lane.depth_begin.size(); ++d) lane.depth_begin[d] += lane.depth_begin[d - 1];
  std::vector<uint32_t> fill(lane.depth_begin.begin(), lane.depth_begin.end() - 1);
  lane.slices.resize(all.size());
  for (const Slice& s : all) lane.slices[fill[static_cast<size_t>(s.depth)]++] = s;
}

// A device stream's slices sorted by start and packed greedily into rows (their depth): one
// row while they do not overlap. Widens [*begin, *end) to cover them.
void packIntoRows(std::vector<Slice>& v, int64_t* begin, int64_t* end) {
  std::stable_sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; });
  std::vector<int64_t> row_end;
  for (Slice& s : v) {
    size_t r = 0;
    while (r < row_end.size() && row_end[r] > s.start_ns) ++r;
    if (r == row_end.size()) row_end.push_back(kMinTime);
    row_end[r] = s.end();
    s.depth = static_cast<int16_t>(std::min<size_t>(r, 4095));
    *begin = std::min(*begin, s.start_ns);
    *end = std::max(*end, s.end());
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace timeline_detail
using namespace timeline_detail;

uint32_t Lane::lowerBound(int d, int64_t t) const {
  if (d < 0 || d >= depthCount()) return 0;
  auto b = slices.begin() + depth_begin[static_cast<size_t>(d)];
  auto e = slices.begin() + depth_begin[static_cast<size_t>(d) + 1];
  return static_cast<uint32_t>(
      std::lower_bound(b, e, t, [](const Slice& s, int64_t v) { return s.start_ns < v; }) - slices.begin());
}

std::pair<uint32_t, uint32_t> Lane::visible(int d, int64_t begin_ns, int64_t end_ns) const {
  if (d < 0 || d >= depthCount()) return {0, 0};
  const uint32_t lo = depth_begin[static_cast<size_t>(d)];
  uint32_t first = lowerBound(d, begin_ns);
  // Same-depth slices do not overlap (nearly: allow a few for clock jitter), so at most the few
  // slices before `first` can reach into the window.
  for (int k = 0; k < 4 && first > lo && slices[first - 1].end() > begin_ns; ++k) --first;
  uint32_t last = lowerBound(d, end_ns);
  return {first, last};
}

int64_t Lane::at(int d, int64_t t) const {
  auto [first, last] = visible(d, t, t + 1);
  for (uint32_t i = first; i < last; ++i) {
    if (slices[i].start_ns <= t && t < slices[i].end()) return i;
  }
  return -1;
}

StatusOr<std::unique_ptr<TimelineData>> TimelineData::load(const std::string& path, int64_t run_id, int workers) {
  LoadOptions o;
  o.workers = workers;
  return load(path, run_id, o);
}

// TimelineData::load in its phases: read the run's summary, plan the work, read the ops in
// parallel, merge the workers' strings, then build the thread, predicted and task lanes.
class TimelineLoader {
 public:
  TimelineLoader(const std::string& path, int64_t run_id, const LoadOptions& options)
      : path_(path), run_id_(run_id), options_(options), data_(new TimelineData()) {}

  StatusOr<std::unique_ptr<TimelineData>> load() {
    RETURN_IF_ERROR(readSummary());
    planWork();
    RETURN_IF_ERROR(readOps());
    mergeStrings();
    fillThreadLanes();
    addPredictedLanes();
    addTaskLanes();
    settleBounds();
    return std::move(data_);
  }

 private:
  // The run, its threads and steps; whether the load is partial, and then its window and the
  // lanes' density blocks.
  Status readSummary() {
    ASSIGN_OR_RETURN(reader_, TraceReader::open(path_));
    RETURN_IF_ERROR(reader_->beginSnapshot());
    auto run = reader_->run(run_id_);
    auto threads = reader_->threads(run_id_);
    auto steps = reader_->steps(run_id_);
    (void)reader_->endSnapshot();
    if (!run.isOk()) return run.status();
    if (!threads.isOk()) return threads.status();
    if (!steps.isOk()) return steps.status();
    run_ = std::move(run).value();
    threads_ = std::move(threads).value();

    TimelineData& d = *data_;
    d.run_id_ = run_id_;
    d.model_ = hostModelParamsFor(run_);
    d.steps_ = std::move(steps).value();
    d.begin_ns_ = kMaxTime;
    d.end_ns_ = kMinTime;
    for (const ThreadSummary& t : threads_) d.total_ops_ += t.op_count;
    d.partial_ = d.total_ops_ > options_.full_load_ops;
    // The ops to read: all of them, or those starting in the window (none without one).
    if (d.partial_) {
      want_ = options_.has_window ? options_.window : TimeWindow{0, 0};
      d.loaded_ = want_;
      ASSIGN_OR_RETURN(std::vector<OpBlockSummary> rows, reader_->opBlocks(run_id_));
      for (const OpBlockSummary& b : rows) blocks_[b.thread_id].push_back({b.min_start_ns, b.max_end_ns, b.ops});
    }
    return Status();
  }

  // One lane per thread; work items: each thread's part of the window cut into equal time
  // chunks of about 200k ops (and, for a partial load, the ops enclosing the window's start).
  void planWork() {
    TimelineData& d = *data_;
    for (const ThreadSummary& t : threads_) {
      Lane lane;
      lane.kind = LaneKind::kThread;
      lane.thread_id = t.thread_id;
      lane.backward_ops = t.backward_op_count;
      lane.total_ops = t.op_count;
      lane.title = "thread " + std::to_string(t.thread_id) +
                   (t.backward_op_count * 2 > t.op_count ? " \xC2\xB7 backward" : " \xC2\xB7 main");
      auto bl = blocks_.find(t.thread_id);
      if (bl != blocks_.end()) lane.blocks = std::move(bl->second);
      const size_t li = d.lanes_.size();
      d.begin_ns_ = std::min(d.begin_ns_, t.first_start_ns);
      d.end_ns_ = std::max(d.end_ns_, t.last_end_ns);
      const int64_t lo = std::max(t.first_start_ns, want_.begin_ns);
      const int64_t hi = std::min(t.last_end_ns + 1, want_.end_ns);
      int64_t ops = t.op_count;
      if (d.partial_) {
        ops = 0;
        for (const DensityBlock& b : lane.blocks) {
          if (b.end_ns >= lo && b.begin_ns < hi) ops += b.ops;
        }
      }
      d.lanes_.push_back(std::move(lane));
      if (d.partial_ && want_.begin_ns > t.first_start_ns && want_.begin_ns <= t.last_end_ns &&
          want_.begin_ns < want_.end_ns) {
        WorkItem it;
        it.lane = li;
        it.window = {want_.begin_ns, want_.begin_ns + 1};
        it.enclosing = true;
        items_.push_back(std::move(it));
      }
      if (lo >= hi) continue;
      const int64_t chunks = std::max<int64_t>(1, ops / 200000 + (ops > 50000 ? 1 : 0));
      for (int64_t c = 0; c < chunks; ++c) {
        WorkItem it;
        it.lane = li;
        it.window.begin_ns = c == 0 ? want_.begin_ns : lo + (hi - lo) / chunks * c;
        it.window.end_ns = c + 1 == chunks ? want_.end_ns : lo + (hi - lo) / chunks * (c + 1);
        items_.push_back(std::move(it));
      }
    }
    d.host_lanes_ = static_cast<int>(d.lanes_.size());
  }

  static Slice toSlice(const OpSlice& o, LocalStrings& ls) {
    Slice s;
    s.start_ns = o.start_ns;
    s.dur_ns = o.dur_ns;
    s.id = o.id;
    s.parent_id = o.parent_id;
    s.seq_nr = o.seq_nr;
    s.device_start_ns = o.device_start_ns;
    s.device_dur_ns = o.device_dur_ns;
    s.step = static_cast<int32_t>(o.step);
    s.name = ls.id(o.name_id, o.name);
    s.shapes = ls.id(o.shapes_id, o.input_shapes);
    s.dtypes = ls.id(o.dtypes_id, o.input_dtypes);
    s.depth = static_cast<int16_t>(std::clamp<int32_t>(o.depth, 0, 4095));
    s.device = static_cast<int8_t>(std::clamp<int32_t>(o.device, -1, 127));
    s.is_backward = o.is_backward ? 1 : 0;
    s.host_sync = o.host_sync ? 1 : 0;
    return s;
  }

  // One work item read by worker `w` into its slices (the worker's string indices).
  void readItem(WorkItem& it, int w, TraceReader* r) {
    it.worker = w;
    if (!r) {
      it.status = internalError("no reader");
      return;
    }
    LocalStrings& ls = locals_[static_cast<size_t>(w)];
    const int64_t thread_id = data_->lanes_[it.lane].thread_id;
    if (it.enclosing) {
      TimelineQuery q;
      q.run_id = run_id_;
      q.thread_id = thread_id;
      q.window = it.window;
      auto rows = r->timeline(q);
      if (!rows.isOk()) {
        it.status = rows.status();
        return;
      }
      for (const OpSlice& o : rows.value()) {
        if (o.start_ns < it.window.begin_ns) it.slices.push_back(toSlice(o, ls));
      }
      return;
    }
    auto cursor = r->openOpCursor(run_id_, thread_id, it.window);
    if (!cursor.isOk()) {
      it.status = cursor.status();
      return;
    }
    OpSlice o;
    while (cursor->next(&o)) it.slices.push_back(toSlice(o, ls));
    it.status = cursor->status();
  }

  // The work items, by up to options_.workers readers (worker 0 reuses the summary's reader,
  // the others open their own connection); then an imported run's device tasks and the damage
  // the readers met.
  Status readOps() {
    int workers = options_.workers;
    if (workers <= 0) workers = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
    workers = std::max(1, std::min<int>(workers, static_cast<int>(std::max<size_t>(items_.size(), 1))));
    locals_.resize(static_cast<size_t>(workers));
    std::atomic<size_t> next{0};
    auto work = [&](int w, TraceReader* r) {
      for (size_t i; (i = next.fetch_add(1)) < items_.size();) readItem(items_[i], w, r);
    };
    std::vector<std::unique_ptr<TraceReader>> readers(static_cast<size_t>(workers));
    readers[0] = std::move(reader_);
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w) {
      pool.emplace_back([&, w] {
        auto r = TraceReader::open(path_);
        if (r.isOk()) readers[static_cast<size_t>(w)] = std::move(r).value();
        work(w, readers[static_cast<size_t>(w)].get());
      });
    }
    work(0, readers[0].get());
    for (auto& t : pool) t.join();
    for (const WorkItem& it : items_) {
      if (!it.status.isOk()) return it.status;
    }
    // The real device tasks of an imported run (of the window, for a partial load).
    if (run_.imported()) {
      ASSIGN_OR_RETURN(tasks_, readers[0]->deviceTasks(run_id_, data_->partial_ ? want_ : TimeWindow{}));
    }
    std::vector<std::string>& damage = data_->damage_;
    for (const auto& r : readers) {
      if (!r) continue;
      for (const std::string& d : r->damage()) {
        if (std::find(damage.begin(), damage.end(), d) == damage.end()) damage.push_back(d);
      }
    }
    return Status();
  }

  // The workers' strings into one table, by the file's string ids; the slices renumbered; the
  // device tasks (whose strings come as text) become slices of their streams.
  void mergeStrings() {
    std::vector<std::string>& strings = data_->strings_;
    std::unordered_map<int64_t, uint32_t> global;
    strings.emplace_back();
    std::vector<std::vector<uint32_t>> remap(locals_.size());
    for (size_t w = 0; w < locals_.size(); ++w) {
      remap[w].push_back(0);
      for (size_t i = 1; i < locals_[w].values_.size(); ++i) {
        auto [g, fresh] = global.emplace(locals_[w].file_ids_[i], static_cast<uint32_t>(strings.size()));
        if (fresh) strings.push_back(std::move(locals_[w].values_[i]));
        remap[w].push_back(g->second);
      }
    }
    for (WorkItem& it : items_) {
      const auto& m = remap[static_cast<size_t>(std::max(it.worker, 0))];
      for (Slice& s : it.slices) {
        s.name = m[s.name];
        s.shapes = m[s.shapes];
        s.dtypes = m[s.dtypes];
      }
    }
    if (tasks_.empty()) return;
    std::unordered_map<std::string, uint32_t> by_text;
    for (size_t i = 0; i < strings.size(); ++i) by_text.emplace(strings[i], static_cast<uint32_t>(i));
    auto intern = [&](const std::string& v) -> uint32_t {
      auto [g, fresh] = by_text.emplace(v, static_cast<uint32_t>(strings.size()));
      if (fresh) strings.push_back(v);
      return g->second;
    };
    for (const DeviceTaskRow& t : tasks_) {
      Slice s;
      s.start_ns = t.start_ns;
      s.dur_ns = std::max<int64_t>(0, t.dur_ns);
      s.id = t.id;
      s.parent_id = t.op_id;
      s.step = static_cast<int32_t>(t.step);
      s.name = intern(t.name);
      s.shapes = t.input_shapes.empty() ? 0 : intern(t.input_shapes);
      s.dtypes = t.type.empty() ? 0 : intern(t.type);
      s.device = static_cast<int8_t>(std::clamp<int32_t>(t.device, -1, 127));
      streams_[{t.device, t.stream}].push_back(s);
    }
  }

  // Thread lanes: concatenate the chunks (time order), then a stable counting sort by depth.
  void fillThreadLanes() {
    TimelineData& d = *data_;
    for (size_t li = 0; li < d.lanes_.size(); ++li) {
      std::vector<Slice> all;
      size_t total = 0;
      for (const WorkItem& it : items_) total += it.lane == li ? it.slices.size() : 0;
      all.reserve(total);
      for (WorkItem& it : items_) {
        if (it.lane != li) continue;
        all.insert(all.end(), it.slices.begin(), it.slices.end());
        std::vector<Slice>().swap(it.slices);
      }
      fillByDepth(d.lanes_[li], all);
      d.op_count_ += static_cast<int64_t>(all.size());
    }
  }

  // The predicted timeline of an npu run: the host lane and each npu's stream, packed greedily
  // into rows (one row while a stream is serial, as the prediction makes it), and the index from
  // host op to its predicted kernel.
  void addPredictedLanes() {
    TimelineData& d = *data_;
    TimelineData::Predicted predicted;
    if (!run_.imported()) predicted = d.predict();
    for (bool comm : {false, true}) {
      std::vector<std::vector<Slice>>& per_device = comm ? predicted.per_device_comm : predicted.per_device;
      for (size_t dev = 0; dev < per_device.size(); ++dev) {
        auto& v = per_device[dev];
        if (v.empty()) continue;
        int64_t ignored_begin = kMaxTime;
        packIntoRows(v, &ignored_begin, &d.end_ns_);  // the modeled stream may run past the host
        Lane lane;
        lane.kind = LaneKind::kDevice;
        lane.device = static_cast<int32_t>(dev);
        lane.title = "npu:" + std::to_string(dev) + (comm ? " comm (predicted)" : " (predicted)");
        fillByDepth(lane, v);
        d.lanes_.push_back(std::move(lane));
      }
    }
    if (!predicted.host.empty()) {
      Lane lane;
      lane.kind = LaneKind::kDevice;  // device -1: the predicted host
      lane.title = "host (predicted)";
      for (const Slice& p : predicted.host) d.end_ns_ = std::max(d.end_ns_, p.end());
      fillByDepth(lane, predicted.host);
      d.lanes_.push_back(std::move(lane));
    }
    for (size_t li = static_cast<size_t>(d.host_lanes_); li < d.lanes_.size(); ++li) {
      const Lane& lane = d.lanes_[li];
      if (lane.kind != LaneKind::kDevice || lane.device < 0) continue;
      for (uint32_t i = 0; i < lane.slices.size(); ++i) {
        d.device_copy_by_op_.push_back({lane.slices[i].id, SliceRef{static_cast<int>(li), i}});
      }
    }
    std::sort(d.device_copy_by_op_.begin(), d.device_copy_by_op_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  // Real device streams: one lane each (rows only where tasks of a stream overlap), and the
  // index from launching op to task.
  void addTaskLanes() {
    TimelineData& d = *data_;
    for (auto& [key, v] : streams_) {
      packIntoRows(v, &d.begin_ns_, &d.end_ns_);
      Lane lane;
      lane.kind = LaneKind::kTasks;
      lane.device = key.first;
      lane.stream = key.second;
      lane.title = "device " + std::to_string(key.first) + " \xC2\xB7 stream " + std::to_string(key.second);
      fillByDepth(lane, v);
      const int li = static_cast<int>(d.lanes_.size());
      for (uint32_t i = 0; i < lane.slices.size(); ++i) {
        if (lane.slices[i].parent_id >= 0) d.tasks_by_op_.push_back({lane.slices[i].parent_id, SliceRef{li, i}});
      }
      d.lanes_.push_back(std::move(lane));
    }
    std::sort(d.tasks_by_op_.begin(), d.tasks_by_op_.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return d.slice(a.second).start_ns < d.slice(b.second).start_ns;
    });
  }

  // The time range covers the steps too; an empty run gets a millisecond from its start.
  void settleBounds() {
    TimelineData& d = *data_;
    for (const StepRow& s : d.steps_) {
      d.begin_ns_ = std::min(d.begin_ns_, s.start_ns);
      d.end_ns_ = std::max(d.end_ns_, s.start_ns + s.dur_ns);
    }
    if (d.begin_ns_ > d.end_ns_) {
      d.begin_ns_ = run_.started_ns;
      d.end_ns_ = run_.started_ns + 1000000;
    }
    if (d.end_ns_ <= d.begin_ns_) d.end_ns_ = d.begin_ns_ + 1000;
  }

  const std::string& path_;
  const int64_t run_id_;
  const LoadOptions& options_;
  std::unique_ptr<TimelineData> data_;
  std::unique_ptr<TraceReader> reader_;
  RunRow run_;
  std::vector<ThreadSummary> threads_;
  TimeWindow want_;
  std::unordered_map<int64_t, std::vector<DensityBlock>> blocks_;
  std::vector<WorkItem> items_;
  std::vector<LocalStrings> locals_;
  std::vector<DeviceTaskRow> tasks_;
  std::map<std::pair<int32_t, int32_t>, std::vector<Slice>> streams_;  // (device, stream) -> tasks
};

StatusOr<std::unique_ptr<TimelineData>> TimelineData::load(const std::string& path, int64_t run_id,
                                                           const LoadOptions& options) {
  return TimelineLoader(path, run_id, options).load();
}

SliceRef TimelineData::findById(int64_t id) const {
  for (int li = 0; li < host_lanes_; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    for (int d = 0; d < lane.depthCount(); ++d) {
      auto b = lane.slices.begin() + lane.depth_begin[static_cast<size_t>(d)];
      auto e = lane.slices.begin() + lane.depth_begin[static_cast<size_t>(d) + 1];
      auto it = std::lower_bound(b, e, id, [](const Slice& s, int64_t v) { return s.id < v; });
      if (it != e && it->id == id) return {li, static_cast<uint32_t>(it - lane.slices.begin())};
    }
  }
  // Ids are in start order on a thread; fall back to a scan should a file break that.
  for (int li = 0; li < host_lanes_; ++li) {
    const auto& v = lanes_[static_cast<size_t>(li)].slices;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].id == id) return {li, static_cast<uint32_t>(i)};
    }
  }
  return {};
}

SliceRef TimelineData::launchOf(SliceRef task) const {
  if (!task.valid() || lanes_[static_cast<size_t>(task.lane)].kind != LaneKind::kTasks) return {};
  const int64_t op = slice(task).parent_id;
  return op >= 0 ? findById(op) : SliceRef{};
}

std::vector<SliceRef> TimelineData::tasksOf(SliceRef host) const {
  std::vector<SliceRef> out;
  if (!host.valid() || lanes_[static_cast<size_t>(host.lane)].kind != LaneKind::kThread) return out;
  const int64_t id = slice(host).id;
  auto it = std::lower_bound(tasks_by_op_.begin(), tasks_by_op_.end(), id,
                             [](const auto& e, int64_t v) { return e.first < v; });
  for (; it != tasks_by_op_.end() && it->first == id; ++it) out.push_back(it->second);
  return out;
}

int64_t TimelineData::estimateOps(int64_t begin_ns, int64_t end_ns) const {
  if (end_ns <= begin_ns) return 0;
  double total = 0;
  for (int li = 0; li < host_lanes_; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    if (!partial_) {
      for (int d = 0; d < lane.depthCount(); ++d) total += lane.lowerBound(d, end_ns) - lane.lowerBound(d, begin_ns);
      continue;
    }
    for (const DensityBlock& b : lane.blocks) {
      if (b.end_ns <= begin_ns || b.begin_ns >= end_ns) continue;
      // Ops spread evenly over the block's span.
      const double span = static_cast<double>(std::max<int64_t>(1, b.end_ns - b.begin_ns));
      const double part = static_cast<double>(std::min(b.end_ns, end_ns) - std::max(b.begin_ns, begin_ns));
      total += static_cast<double>(b.ops) * std::clamp(part / span, 0.0, 1.0);
    }
  }
  return static_cast<int64_t>(total + 0.5);
}

SliceRef TimelineData::deviceCopyOf(SliceRef host) const {
  if (!host.valid()) return {};
  const int64_t id = slice(host).id;
  auto it = std::lower_bound(device_copy_by_op_.begin(), device_copy_by_op_.end(), id,
                             [](const auto& e, int64_t v) { return e.first < v; });
  return it != device_copy_by_op_.end() && it->first == id ? it->second : SliceRef{};
}

const PredictedStep* TimelineData::predictedStep(int64_t step) const {
  auto it = std::lower_bound(predicted_steps_.begin(), predicted_steps_.end(), step,
                             [](const PredictedStep& p, int64_t v) { return p.step < v; });
  return it != predicted_steps_.end() && it->step == step ? &*it : nullptr;
}

// Every step whose ops are all in memory, predicted from its host lanes' ops and placed on the
// recording's clock (PredictedStepPlacer); copies of the ops at their predicted times.
TimelineData::Predicted TimelineData::predict() {
  Predicted out;
  std::map<int64_t, std::vector<SliceRef>> by_step;
  for (int li = 0; li < host_lanes_; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    for (uint32_t i = 0; i < lane.slices.size(); ++i) {
      if (lane.slices[i].step >= 0) by_step[lane.slices[i].step].push_back(SliceRef{li, i});
    }
  }
  PredictedStepPlacer placer;
  std::unordered_map<int64_t, SliceRef> by_id;
  std::vector<PredictedOp> ops;
  for (auto& [step, refs] : by_step) {
    const StepRow* row = stepByIndex(step);
    if (partial_ && (!row || !covers(row->start_ns, row->start_ns + row->dur_ns))) continue;
    std::vector<PredictedInput> in;
    in.reserve(refs.size());
    by_id.clear();
    int64_t first = kMaxTime;
    for (SliceRef r : refs) {
      const Slice& s = slice(r);
      PredictedInput p;
      p.id = s.id;
      p.parent_id = s.parent_id;
      p.start_ns = s.start_ns;
      p.device = s.device;
      p.device_dur_ns = s.device_dur_ns;
      p.host_sync = s.host_sync != 0;
      p.backward = s.is_backward != 0;
      p.name = str(s.name);
      if (p.name.rfind("hcom_", 0) == 0) p.bytes = inputBytes(str(s.shapes), str(s.dtypes));
      in.push_back(p);
      by_id.emplace(s.id, r);
      first = std::min(first, s.start_ns);
    }
    const PredictedStep p = predictStep(step, std::move(in), model_, &ops);
    if (p.kernels == 0) continue;
    predicted_steps_.push_back(p);
    const int64_t at = placer.place(row ? row->start_ns : first, p.step_ns);
    for (const PredictedOp& o : ops) {
      Slice c = slice(by_id[o.id]);
      c.start_ns = at + o.host_start_ns;
      c.dur_ns = o.host_end_ns - o.host_start_ns;
      c.depth = static_cast<int16_t>(std::clamp(o.depth, 0, 4095));
      out.host.push_back(c);
      if (o.device_start_ns < 0) continue;
      c.start_ns = at + o.device_start_ns;
      c.dur_ns = o.device_dur_ns;
      const size_t d = static_cast<size_t>(o.device);
      // Collectives run on the npu's communication stream, kernels on its compute stream.
      auto& lanes = o.role == PredictedRole::kCollective ? out.per_device_comm : out.per_device;
      if (lanes.size() <= d) lanes.resize(d + 1);
      lanes[d].push_back(c);
    }
  }
  return out;
}

int64_t TimelineData::selfNs(SliceRef r) const {
  const Lane& lane = lanes_[static_cast<size_t>(r.lane)];
  const Slice& p = lane.slices[r.index];
  int64_t self = p.dur_ns;
  if (lane.kind != LaneKind::kThread) return self;
  const int d = p.depth + 1;
  if (d >= lane.depthCount()) return self;
  const uint32_t end = lane.depth_begin[static_cast<size_t>(d) + 1];
  for (uint32_t i = lane.lowerBound(d, p.start_ns); i < end && lane.slices[i].start_ns <= p.end(); ++i) {
    if (lane.slices[i].parent_id == p.id) self -= lane.slices[i].dur_ns;
  }
  return self;
}

SliceRef TimelineData::partner(SliceRef r) const {
  if (!r.valid()) return {};
  const Slice& s = slice(r);
  if (s.seq_nr < 0) return {};
  SliceRef best;
  int best_depth = std::numeric_limits<int>::max();
  int64_t best_start = kMaxTime;
  for (int li = 0; li < host_lanes_; ++li) {
    const auto& v = lanes_[static_cast<size_t>(li)].slices;
    for (size_t i = 0; i < v.size(); ++i) {
      const Slice& c = v[i];
      if (c.seq_nr != s.seq_nr || c.is_backward == s.is_backward) continue;
      if (c.depth < best_depth || (c.depth == best_depth && c.start_ns < best_start)) {
        best = {li, static_cast<uint32_t>(i)};
        best_depth = c.depth;
        best_start = c.start_ns;
      }
    }
  }
  return best;
}

const StepRow* TimelineData::stepAt(int64_t t) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), t,
                             [](int64_t v, const StepRow& s) { return v < s.start_ns; });
  if (it == steps_.begin()) return nullptr;
  --it;
  return t < it->start_ns + it->dur_ns ? &*it : nullptr;
}

const StepRow* TimelineData::stepByIndex(int64_t step) const {
  auto it = std::lower_bound(steps_.begin(), steps_.end(), step,
                             [](const StepRow& s, int64_t v) { return s.step < v; });
  return it != steps_.end() && it->step == step ? &*it : nullptr;
}

uint32_t TimelineData::stringIndex(std::string_view s) const {
  for (size_t i = 1; i < strings_.size(); ++i) {
    if (strings_[i] == s) return static_cast<uint32_t>(i);
  }
  return 0;
}

OpAggregateTable TimelineData::aggregate(const TimeWindow& window, OpGroupBy group_by, OpSortKey sort) const {
  // The ops starting in the window, then (as children only) the later ops that start before the
  // last of those ends: the store's aggregate over the slices held here.
  OpAggregator agg(group_by == OpGroupBy::kNameAndShapes);
  int64_t reach = kMinTime;
  for (int li = 0; li < host_lanes_; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    for (int d = 0; d < lane.depthCount(); ++d) {
      const uint32_t last = lane.lowerBound(d, window.end_ns);
      for (uint32_t i = lane.lowerBound(d, window.begin_ns); i < last; ++i) {
        const Slice& s = lane.slices[i];
        agg.add(s.id, s.parent_id, s.name, s.shapes, s.dur_ns, s.device_dur_ns, true);
        reach = std::max(reach, s.end());
      }
    }
  }
  for (int li = 0; li < host_lanes_ && reach > window.end_ns; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    for (int d = 1; d < lane.depthCount(); ++d) {
      const uint32_t last = lane.lowerBound(d, reach);
      for (uint32_t i = lane.lowerBound(d, window.end_ns); i < last; ++i) {
        const Slice& s = lane.slices[i];
        agg.add(s.id, s.parent_id, s.name, s.shapes, s.dur_ns, s.device_dur_ns, false);
      }
    }
  }
  agg.finish();
  return agg.table([this](int64_t id) { return std::string(str(static_cast<uint32_t>(id))); }, sort, true);
}

std::vector<SliceRef> TimelineData::search(std::string_view needle) const {
  std::vector<SliceRef> out;
  if (needle.empty()) return out;
  const std::string n = lower(needle);
  std::vector<uint8_t> mask(strings_.size(), 0);
  bool any = false;
  for (size_t i = 1; i < strings_.size(); ++i) {
    mask[i] = lower(strings_[i]).find(n) != std::string::npos;
    any = any || mask[i];
  }
  if (!any) return out;
  for (int li = 0; li < host_lanes_; ++li) {
    const auto& v = lanes_[static_cast<size_t>(li)].slices;
    for (size_t i = 0; i < v.size(); ++i) {
      if (mask[v[i].name]) out.push_back({li, static_cast<uint32_t>(i)});
    }
  }
  std::sort(out.begin(), out.end(), [&](const SliceRef& a, const SliceRef& b) {
    const Slice& x = slice(a);
    const Slice& y = slice(b);
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (a.lane != b.lane) return a.lane < b.lane;
    return x.depth < y.depth;
  });
  return out;
}

}  // namespace npuscope::gui
