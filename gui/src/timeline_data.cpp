#include "npuscope/gui/timeline_data.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <limits>
#include <map>
#include <thread>
#include <unordered_map>

namespace npuscope::gui {

namespace {

constexpr int64_t kMinTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();

// Per-worker interning of the reader's string views. The reader hands out views into its own
// cache, so a pointer identifies a string; the content check guards against a cache reload of
// a live file reusing an address.
class LocalStrings {
 public:
  uint32_t id(std::string_view s) {
    if (s.empty()) return 0;
    auto it = by_ptr_.find(s.data());
    if (it != by_ptr_.end() && values_[it->second] == s) return it->second;
    values_.emplace_back(s);
    const auto id = static_cast<uint32_t>(values_.size() - 1);
    by_ptr_[s.data()] = id;
    return id;
  }
  std::vector<std::string> values_{std::string()};

 private:
  std::unordered_map<const char*, uint32_t> by_ptr_;
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

}  // namespace

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

StatusOr<std::unique_ptr<TimelineData>> TimelineData::load(const std::string& path, int64_t run_id,
                                                           const LoadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::open(path));
  RETURN_IF_ERROR(reader->beginSnapshot());
  auto run = reader->run(run_id);
  auto threads = reader->threads(run_id);
  auto steps = reader->steps(run_id);
  (void)reader->endSnapshot();
  if (!run.isOk()) return run.status();
  if (!threads.isOk()) return threads.status();
  if (!steps.isOk()) return steps.status();

  std::unique_ptr<TimelineData> data(new TimelineData());
  data->run_id_ = run_id;
  data->model_ = hostModelParamsFor(run.value());
  data->steps_ = std::move(steps).value();
  data->begin_ns_ = kMaxTime;
  data->end_ns_ = kMinTime;
  for (const ThreadSummary& t : threads.value()) data->total_ops_ += t.op_count;
  data->partial_ = data->total_ops_ > options.full_load_ops;
  // The ops to read: all of them, or those starting in the window (none without one).
  TimeWindow want;
  if (data->partial_) {
    want = options.has_window ? options.window : TimeWindow{0, 0};
    data->loaded_ = want;
  }
  std::unordered_map<int64_t, std::vector<DensityBlock>> blocks;
  if (data->partial_) {
    ASSIGN_OR_RETURN(std::vector<OpBlockSummary> rows, reader->opBlocks(run_id));
    for (const OpBlockSummary& b : rows) blocks[b.thread_id].push_back({b.min_start_ns, b.max_end_ns, b.ops});
  }

  // Work items: each thread's part of the window cut into equal time chunks of about 200k ops.
  std::vector<WorkItem> items;
  for (const ThreadSummary& t : threads.value()) {
    Lane lane;
    lane.kind = LaneKind::kThread;
    lane.thread_id = t.thread_id;
    lane.backward_ops = t.backward_op_count;
    lane.total_ops = t.op_count;
    lane.title = "thread " + std::to_string(t.thread_id) +
                 (t.backward_op_count * 2 > t.op_count ? " \xC2\xB7 backward" : " \xC2\xB7 main");
    auto bl = blocks.find(t.thread_id);
    if (bl != blocks.end()) lane.blocks = std::move(bl->second);
    const size_t li = data->lanes_.size();
    data->begin_ns_ = std::min(data->begin_ns_, t.first_start_ns);
    data->end_ns_ = std::max(data->end_ns_, t.last_end_ns);
    const int64_t lo = std::max(t.first_start_ns, want.begin_ns);
    const int64_t hi = std::min(t.last_end_ns + 1, want.end_ns);
    int64_t ops = t.op_count;
    if (data->partial_) {
      ops = 0;
      for (const DensityBlock& b : lane.blocks) {
        if (b.end_ns >= lo && b.begin_ns < hi) ops += b.ops;
      }
    }
    data->lanes_.push_back(std::move(lane));
    if (data->partial_ && want.begin_ns > t.first_start_ns && want.begin_ns <= t.last_end_ns &&
        want.begin_ns < want.end_ns) {
      // First the ops that started before the window and enclose its start.
      WorkItem it;
      it.lane = li;
      it.window = {want.begin_ns, want.begin_ns + 1};
      it.enclosing = true;
      items.push_back(std::move(it));
    }
    if (lo >= hi) continue;
    const int64_t chunks = std::max<int64_t>(1, ops / 200000 + (ops > 50000 ? 1 : 0));
    for (int64_t c = 0; c < chunks; ++c) {
      WorkItem it;
      it.lane = li;
      it.window.begin_ns = c == 0 ? want.begin_ns : lo + (hi - lo) / chunks * c;
      it.window.end_ns = c + 1 == chunks ? want.end_ns : lo + (hi - lo) / chunks * (c + 1);
      items.push_back(std::move(it));
    }
  }
  data->host_lanes_ = static_cast<int>(data->lanes_.size());

  int workers = options.workers;
  if (workers <= 0) workers = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  workers = std::max(1, std::min<int>(workers, static_cast<int>(std::max<size_t>(items.size(), 1))));
  std::vector<LocalStrings> locals(static_cast<size_t>(std::max(workers, 1)));
  std::atomic<size_t> next{0};
  auto toSlice = [](const OpSlice& o, LocalStrings& ls) {
    Slice s;
    s.start_ns = o.start_ns;
    s.dur_ns = o.dur_ns;
    s.id = o.id;
    s.parent_id = o.parent_id;
    s.seq_nr = o.seq_nr;
    s.device_start_ns = o.device_start_ns;
    s.device_dur_ns = o.device_dur_ns;
    s.step = static_cast<int32_t>(o.step);
    s.name = ls.id(o.name);
    s.shapes = ls.id(o.input_shapes);
    s.dtypes = ls.id(o.input_dtypes);
    s.depth = static_cast<int16_t>(std::clamp<int32_t>(o.depth, 0, 4095));
    s.device = static_cast<int8_t>(std::clamp<int32_t>(o.device, -1, 127));
    s.is_backward = o.is_backward ? 1 : 0;
    s.host_sync = o.host_sync ? 1 : 0;
    return s;
  };
  auto work = [&](int w, TraceReader* r) {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      WorkItem& it = items[i];
      it.worker = w;
      if (!r) {
        it.status = internalError("no reader");
        continue;
      }
      LocalStrings& ls = locals[static_cast<size_t>(w)];
      if (it.enclosing) {
        TimelineQuery q;
        q.run_id = run_id;
        q.thread_id = data->lanes_[it.lane].thread_id;
        q.window = it.window;
        auto rows = r->timeline(q);
        if (!rows.isOk()) {
          it.status = rows.status();
          continue;
        }
        for (const OpSlice& o : rows.value()) {
          if (o.start_ns < it.window.begin_ns) it.slices.push_back(toSlice(o, ls));
        }
        continue;
      }
      auto cursor = r->openOpCursor(run_id, data->lanes_[it.lane].thread_id, it.window);
      if (!cursor.isOk()) {
        it.status = cursor.status();
        continue;
      }
      OpSlice o;
      while (cursor->next(&o)) it.slices.push_back(toSlice(o, ls));
      it.status = cursor->status();
    }
  };
  std::vector<DeviceTaskRow> tasks;
  std::map<std::pair<int32_t, int32_t>, std::vector<Slice>> streams;  // (device, stream) -> tasks
  {
    // Worker 0 reuses the reader opened above; the others open their own connection.
    std::vector<std::unique_ptr<TraceReader>> readers(static_cast<size_t>(workers));
    readers[0] = std::move(reader);
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w) {
      pool.emplace_back([&, w] {
        auto r = TraceReader::open(path);
        if (r.isOk()) readers[static_cast<size_t>(w)] = std::move(r).value();
        work(w, readers[static_cast<size_t>(w)].get());
      });
    }
    work(0, readers[0].get());
    for (auto& t : pool) t.join();
    for (const WorkItem& it : items) {
      if (!it.status.isOk()) return it.status;
    }
    // The real device tasks of an imported run (of the window, for a partial load).
    if (run->imported()) {
      ASSIGN_OR_RETURN(tasks, readers[0]->deviceTasks(run_id, data->partial_ ? want : TimeWindow{}));
    }
    for (const auto& r : readers) {
      if (!r) continue;
      for (const std::string& d : r->damage()) {
        if (std::find(data->damage_.begin(), data->damage_.end(), d) == data->damage_.end()) data->damage_.push_back(d);
      }
    }
    // Merge the workers' strings into one table.
    std::unordered_map<std::string, uint32_t> global;
    data->strings_.emplace_back();
    global.emplace(std::string(), 0);
    std::vector<std::vector<uint32_t>> remap(locals.size());
    for (size_t w = 0; w < locals.size(); ++w) {
      for (const std::string& v : locals[w].values_) {
        auto [g, fresh] = global.emplace(v, static_cast<uint32_t>(data->strings_.size()));
        if (fresh) data->strings_.push_back(v);
        remap[w].push_back(g->second);
      }
    }
    for (WorkItem& it : items) {
      const auto& m = remap[static_cast<size_t>(std::max(it.worker, 0))];
      for (Slice& s : it.slices) {
        s.name = m[s.name];
        s.shapes = m[s.shapes];
        s.dtypes = m[s.dtypes];
      }
    }
    // Task strings go into the same table.
    auto intern = [&](const std::string& v) -> uint32_t {
      auto [g, fresh] = global.emplace(v, static_cast<uint32_t>(data->strings_.size()));
      if (fresh) data->strings_.push_back(v);
      return g->second;
    };
    for (const DeviceTaskRow& t : tasks) {
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
      streams[{t.device, t.stream}].push_back(s);
    }
  }

  // Thread lanes: concatenate the chunks (time order), then a stable counting sort by depth.
  for (size_t li = 0; li < data->lanes_.size(); ++li) {
    std::vector<Slice> all;
    size_t total = 0;
    for (const WorkItem& it : items) total += it.lane == li ? it.slices.size() : 0;
    all.reserve(total);
    for (WorkItem& it : items) {
      if (it.lane != li) continue;
      all.insert(all.end(), it.slices.begin(), it.slices.end());
      std::vector<Slice>().swap(it.slices);
    }
    fillByDepth(data->lanes_[li], all);
    data->op_count_ += static_cast<int64_t>(all.size());
  }

  // The predicted timeline of an npu run: the host lane and each npu's stream, packed greedily
  // into rows (one row while a stream is serial, as the prediction makes it).
  Predicted predicted;
  if (!run->imported()) predicted = data->predict();
  for (bool comm : {false, true}) {
    std::vector<std::vector<Slice>>& per_device = comm ? predicted.per_device_comm : predicted.per_device;
    for (size_t dev = 0; dev < per_device.size(); ++dev) {
      auto& v = per_device[dev];
      if (v.empty()) continue;
      int64_t ignored_begin = kMaxTime;
      packIntoRows(v, &ignored_begin, &data->end_ns_);  // the modeled stream may run past the host
      Lane lane;
      lane.kind = LaneKind::kDevice;
      lane.device = static_cast<int32_t>(dev);
      lane.title = "npu:" + std::to_string(dev) + (comm ? " comm (predicted)" : " (predicted)");
      fillByDepth(lane, v);
      data->lanes_.push_back(std::move(lane));
    }
  }
  if (!predicted.host.empty()) {
    Lane lane;
    lane.kind = LaneKind::kDevice;  // device -1: the predicted host
    lane.title = "host (predicted)";
    for (const Slice& p : predicted.host) data->end_ns_ = std::max(data->end_ns_, p.end());
    fillByDepth(lane, predicted.host);
    data->lanes_.push_back(std::move(lane));
  }
  for (size_t li = static_cast<size_t>(data->host_lanes_); li < data->lanes_.size(); ++li) {
    const Lane& lane = data->lanes_[li];
    if (lane.kind != LaneKind::kDevice || lane.device < 0) continue;
    for (uint32_t i = 0; i < lane.slices.size(); ++i) {
      data->device_copy_by_op_.push_back({lane.slices[i].id, SliceRef{static_cast<int>(li), i}});
    }
  }
  std::sort(data->device_copy_by_op_.begin(), data->device_copy_by_op_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  // Real device streams: one lane each (rows only where tasks of a stream overlap), and the
  // index from launching op to task.
  for (auto& [key, v] : streams) {
    packIntoRows(v, &data->begin_ns_, &data->end_ns_);
    Lane lane;
    lane.kind = LaneKind::kTasks;
    lane.device = key.first;
    lane.stream = key.second;
    lane.title = "device " + std::to_string(key.first) + " \xC2\xB7 stream " + std::to_string(key.second);
    fillByDepth(lane, v);
    const int li = static_cast<int>(data->lanes_.size());
    for (uint32_t i = 0; i < lane.slices.size(); ++i) {
      if (lane.slices[i].parent_id >= 0) data->tasks_by_op_.push_back({lane.slices[i].parent_id, SliceRef{li, i}});
    }
    data->lanes_.push_back(std::move(lane));
  }
  std::sort(data->tasks_by_op_.begin(), data->tasks_by_op_.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return data->slice(a.second).start_ns < data->slice(b.second).start_ns;
  });

  for (const StepRow& s : data->steps_) {
    data->begin_ns_ = std::min(data->begin_ns_, s.start_ns);
    data->end_ns_ = std::max(data->end_ns_, s.start_ns + s.dur_ns);
  }
  if (data->begin_ns_ > data->end_ns_) {  // an empty run
    data->begin_ns_ = run->started_ns;
    data->end_ns_ = run->started_ns + 1000000;
  }
  if (data->end_ns_ <= data->begin_ns_) data->end_ns_ = data->begin_ns_ + 1000;
  return data;
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
  struct Group {
    uint32_t name = 0, shapes = 0;
    int64_t calls = 0, total = 0, self = 0, min = kMaxTime, max = kMinTime, device = 0, device_calls = 0;
  };
  const bool by_shapes = group_by == OpGroupBy::kNameAndShapes;
  std::unordered_map<uint64_t, size_t> index;
  std::vector<Group> groups;
  int64_t selected = 0;
  for (int li = 0; li < host_lanes_; ++li) {
    const Lane& lane = lanes_[static_cast<size_t>(li)];
    for (int d = 0; d < lane.depthCount(); ++d) {
      const uint32_t first = lane.lowerBound(d, window.begin_ns);
      const uint32_t last = lane.lowerBound(d, window.end_ns);
      if (first >= last) continue;
      const bool has_children = d + 1 < lane.depthCount();
      // Children of the selected ops: the next depth, walked alongside in start order.
      uint32_t j = has_children ? lane.lowerBound(d + 1, lane.slices[first].start_ns) : 0;
      const uint32_t child_end = has_children ? lane.depth_begin[static_cast<size_t>(d) + 2] : 0;
      for (uint32_t i = first; i < last; ++i) {
        const Slice& s = lane.slices[i];
        const uint32_t shapes = by_shapes ? s.shapes : 0;
        const uint64_t key = (static_cast<uint64_t>(s.name) << 32) | shapes;
        auto [it, fresh] = index.try_emplace(key, groups.size());
        if (fresh) {
          groups.emplace_back();
          groups.back().name = s.name;
          groups.back().shapes = shapes;
        }
        Group& g = groups[it->second];
        ++g.calls;
        ++selected;
        g.total += s.dur_ns;
        g.self += s.dur_ns;
        g.min = std::min(g.min, s.dur_ns);
        g.max = std::max(g.max, s.dur_ns);
        if (s.device_dur_ns >= 0) {
          g.device += s.device_dur_ns;
          ++g.device_calls;
        }
        if (!has_children) continue;
        while (j < child_end && lane.slices[j].start_ns < s.start_ns) ++j;
        uint32_t next_j = j;
        bool next_set = false;
        for (uint32_t k = j; k < child_end && lane.slices[k].start_ns <= s.end(); ++k) {
          const Slice& c = lane.slices[k];
          if (!next_set && c.start_ns >= s.end()) {
            next_j = k;
            next_set = true;
          }
          if (c.parent_id == s.id) g.self -= c.dur_ns;
          if (!next_set) next_j = k + 1;
        }
        j = next_j;
      }
    }
  }

  OpAggregateTable table;
  table.op_count = selected;
  table.group_count = static_cast<int64_t>(groups.size());
  for (const Group& g : groups) {
    table.self_sum_ns += g.self;
    table.total_device_ns += g.device;
  }
  table.rows.reserve(groups.size());
  for (const Group& g : groups) {
    table.rows.push_back(makeOpAggregate(str(g.name), by_shapes ? str(g.shapes) : std::string(), g.calls, g.total,
                                         g.self, g.min, g.max, g.device, g.device_calls, table.self_sum_ns));
  }
  sortOpTable(&table.rows, sort, true);
  return table;
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
