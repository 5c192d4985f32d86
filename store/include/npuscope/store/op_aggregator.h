#pragma once
// The one self-time aggregate: a key_averages-style op table (count, total, self, min, max and
// device time per op name, or per name and input shapes) from op rows fed in any order. The
// reader's aggregateOps() feeds it from SQL, the GUI's timeline from the ops it holds; both
// name the groups through their own string ids.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "npuscope/store/saturating.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

// Maps op ids to the aggregate group of the op, for subtracting a child's duration from its
// parent's group. Ids are mostly dense and increasing, so pages of a flat array (allocated where
// ids occur) beat a hash map of 10M entries by far.
class IdGroupMap {
 public:
  void set(int64_t id, int32_t group) {
    int32_t* p = page(id >> kPageBits, /*create=*/true);
    p[id & kPageMask] = group;
  }
  // -1 when the id was never set.
  int32_t get(int64_t id) {
    const int32_t* p = page(id >> kPageBits, /*create=*/false);
    return p ? p[id & kPageMask] : -1;
  }

 private:
  static constexpr int kPageBits = 12;
  static constexpr int64_t kPageSize = int64_t{1} << kPageBits;
  static constexpr int64_t kPageMask = kPageSize - 1;

  int32_t* page(int64_t index, bool create) {
    if (index == last_index_) return last_page_;
    auto it = pages_.find(index);
    if (it == pages_.end()) {
      if (!create) return nullptr;
      auto fresh = std::make_unique<int32_t[]>(kPageSize);
      std::fill_n(fresh.get(), kPageSize, -1);
      it = pages_.emplace(index, std::move(fresh)).first;
    }
    last_index_ = index;
    last_page_ = it->second.get();
    return last_page_;
  }

  std::unordered_map<int64_t, std::unique_ptr<int32_t[]>> pages_;
  int64_t last_index_ = std::numeric_limits<int64_t>::min();
  int32_t* last_page_ = nullptr;
};

// One pass over op rows in any order builds the key_averages table: per group count, total,
// min, max and device time; self time is total minus the durations of direct children, whose
// parents are found through IdGroupMap (children met before their parent wait in `pending_`).
class OpAggregator {
 public:
  explicit OpAggregator(bool by_shapes) : by_shapes_(by_shapes) {}

  struct Group {
    int64_t name_id = 0, shapes_id = 0;
    int64_t calls = 0, total = 0, self = 0, min = std::numeric_limits<int64_t>::max(), max = std::numeric_limits<int64_t>::min(), device = 0, device_calls = 0;

    // One call of `dur` (and `device_dur` on the device, < 0: none); its children are subtracted later.
    void count(int64_t dur, int64_t device_dur) {
      ++calls;
      total = saturatingAdd(total, dur);
      self = saturatingAdd(self, dur);
      min = std::min(min, dur);
      max = std::max(max, dur);
      if (device_dur >= 0) {
        device = saturatingAdd(device, device_dur);
        ++device_calls;
      }
    }
    // The calls of `g` (the same key, counted elsewhere) added to these.
    // (Its figures may come from a file: sums saturate.)
    void merge(const Group& g) {
      calls = saturatingAdd(calls, g.calls);
      total = saturatingAdd(total, g.total);
      self = saturatingAdd(self, g.self);
      min = std::min(min, g.min);
      max = std::max(max, g.max);
      device = saturatingAdd(device, g.device);
      device_calls = saturatingAdd(device_calls, g.device_calls);
    }
  };

  // `selected`: the op counts in the table; otherwise it only matters as a child of a selected op.
  void add(int64_t id, int64_t parent_id, int64_t name_id, int64_t shapes_id, int64_t dur, int64_t device_dur,
           bool selected) {
    if (selected) ids_.set(id, countOp(name_id, shapes_id, dur, device_dur));
    if (parent_id >= 0) {
      const int32_t pg = ids_.get(parent_id);
      if (pg >= 0) {
        subtractChild(pg, dur);
      } else {
        pending_.emplace_back(parent_id, dur);
      }
    }
  }

  // Settles children whose parent came after them; children whose parent this aggregator never
  // saw stay in pending() (their parent may be in another part of a split scan, or unselected).
  void finish() {
    std::vector<std::pair<int64_t, int64_t>> left;
    for (const auto& [parent, dur] : pending_) {
      const int32_t pg = ids_.get(parent);
      if (pg >= 0) {
        subtractChild(pg, dur);
      } else {
        left.emplace_back(parent, dur);
      }
    }
    pending_.swap(left);
  }
  const std::vector<std::pair<int64_t, int64_t>>& pending() const { return pending_; }

  // The group of a selected op seen by this aggregator, or -1.
  int32_t groupOfOp(int64_t id) { return ids_.get(id); }
  void subtractChild(int32_t group, int64_t dur) {
    int64_t& self = groups_[static_cast<size_t>(group)].self;
    self = saturatingSub(self, dur);
  }

  // Adds the groups of `part` (another part of a split scan) to this one; returns the index here
  // of each of part's groups.
  std::vector<int32_t> absorb(const OpAggregator& part) {
    std::vector<int32_t> map;
    map.reserve(part.groups_.size());
    for (const Group& g : part.groups_) map.push_back(absorbGroup(g));
    return map;
  }

  // Adds one group counted elsewhere (another aggregator's, or a run's stored op_totals row; by
  // name, its shapes are ignored); returns its index here.
  int32_t absorbGroup(const Group& g) {
    const int32_t here = groupOf(g.name_id, g.shapes_id);
    groups_[static_cast<size_t>(here)].merge(g);
    selected_ = saturatingAdd(selected_, g.calls);
    return here;
  }

  // Counts one selected op in its group without keeping its id (OpTotals keeps ids its own way);
  // returns the group.
  int32_t countOp(int64_t name_id, int64_t shapes_id, int64_t dur, int64_t device_dur) {
    const int32_t g = groupOf(name_id, shapes_id);
    groups_[static_cast<size_t>(g)].count(dur, device_dur);
    ++selected_;
    return g;
  }

  std::vector<Group>& groups() { return groups_; }
  // The group of this key, made (empty) when there is none yet.
  int32_t groupIndex(int64_t name_id, int64_t shapes_id) { return groupOf(name_id, shapes_id); }

  // The key_averages table of the groups, sorted; `string_of` names a name or shapes id.
  OpAggregateTable table(const std::function<std::string(int64_t)>& string_of, OpSortKey sort,
                         bool descending) const;
  int64_t selected() const { return selected_; }

 private:
  int32_t groupOf(int64_t name_id, int64_t shapes_id) {
    if (!by_shapes_ && name_id >= 0 && name_id < kDenseNames) {
      const auto n = static_cast<size_t>(name_id);
      if (n >= by_name_.size()) by_name_.resize(n + 1, -1);
      int32_t& g = by_name_[n];
      if (g < 0) g = newGroup(name_id, 0);
      return g;
    }
    const int64_t s = by_shapes_ ? shapes_id : 0;
    return by_key_.findOrAdd(name_id, s, [&] { return newGroup(name_id, s); });
  }

  int32_t newGroup(int64_t name_id, int64_t shapes_id) {
    Group g;
    g.name_id = name_id;
    g.shapes_id = shapes_id;
    groups_.push_back(g);
    return static_cast<int32_t>(groups_.size() - 1);
  }

  // (name id, shapes id) -> group: open addressing with linear probing, a few thousand keys
  // looked up once per op, where std::unordered_map's node chasing showed in profiles.
  class KeyTable {
   public:
    template <typename Make>
    int32_t findOrAdd(int64_t a, int64_t b, Make make) {
      if ((used_ + 1) * 2 > slots_.size()) grow();
      size_t i = hash(a, b) & (slots_.size() - 1);
      for (;; i = (i + 1) & (slots_.size() - 1)) {
        Slot& s = slots_[i];
        if (s.group < 0) {
          s = Slot{a, b, make()};
          ++used_;
          return s.group;
        }
        if (s.a == a && s.b == b) return s.group;
      }
    }

   private:
    struct Slot {
      int64_t a = 0, b = 0;
      int32_t group = -1;
    };
    static size_t hash(int64_t a, int64_t b) {
      uint64_t h = static_cast<uint64_t>(a) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b) * 0xC2B2AE3D27D4EB4Full;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    void grow() {
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.empty() ? 64 : old.size() * 2, Slot());
      used_ = 0;
      for (const Slot& s : old) {
        if (s.group >= 0) findOrAdd(s.a, s.b, [&] { return s.group; });
      }
    }
    std::vector<Slot> slots_;
    size_t used_ = 0;
  };

  static constexpr int64_t kDenseNames = int64_t{1} << 24;
  bool by_shapes_;
  std::vector<Group> groups_;
  std::vector<int32_t> by_name_;
  KeyTable by_key_;
  IdGroupMap ids_;
  std::vector<std::pair<int64_t, int64_t>> pending_;
  int64_t selected_ = 0;
};

// A run's op table kept while its ops are written (TraceWriter, in the writer's file ids): the
// same groups as OpAggregator by name and shapes over every op of the run, stored in op_totals
// when the run ends, so that a whole-run table reads a few rows instead of every op. Ops come
// in any order. Their children are settled with a parent seen among the last kRecent ids (the
// usual case: a parent comes shortly before or, written when it ends, after its children);
// what is left, parents() names, the writer looks up in the file at the end.
class OpTotals {
 public:
  void clear() { *this = OpTotals(); }

  void add(int64_t id, int64_t parent_id, int64_t name_id, int64_t shapes_id, int64_t dur, int64_t device_dur) {
    const int32_t g = groups_.countOp(name_id, shapes_id, dur, device_dur);
    if (recent_.empty()) {
      recent_.assign(kRecent, Recent{});
      waiting_slots_.assign(kRecent, 0);
    }
    const size_t slot = static_cast<size_t>(id) & (kRecent - 1);
    if (waiting_slots_[slot] != 0) {  // children that came first, perhaps this op's
      auto it = waiting_.find(id);
      if (it != waiting_.end()) {
        groups_.subtractChild(g, it->second);
        waiting_.erase(it);
        --waiting_slots_[slot];
      }
    }
    recent_[slot] = Recent{id, g};
    if (parent_id < 0) return;
    const size_t parent_slot = static_cast<size_t>(parent_id) & (kRecent - 1);
    const Recent& p = recent_[parent_slot];
    if (p.id == parent_id) {
      groups_.subtractChild(p.group, dur);
      return;
    }
    auto [it, fresh] = waiting_.try_emplace(parent_id, 0);
    it->second = saturatingAdd(it->second, dur);
    if (fresh) ++waiting_slots_[parent_slot];
  }

  // Parents not seen among the recent ids (id -> their children's summed durations): seen long
  // before, or never (not in the run).
  const std::unordered_map<int64_t, int64_t>& parents() const { return waiting_; }
  // The groups, with the children of parents() settled by `group_of(id, &name_id, &shapes_id)`
  // (false: the parent is not in the run). The ops may go on being counted afterwards.
  template <typename GroupOf>
  std::vector<OpAggregator::Group> settledGroups(GroupOf group_of) {
    std::vector<std::pair<int32_t, int64_t>> children;
    for (const auto& [parent, dur] : waiting_) {
      int64_t name_id = 0, shapes_id = 0;
      if (group_of(parent, &name_id, &shapes_id)) children.emplace_back(groups_.groupIndex(name_id, shapes_id), dur);
    }
    std::vector<OpAggregator::Group> out = groups_.groups();
    for (const auto& [g, dur] : children) {
      int64_t& self = out[static_cast<size_t>(g)].self;
      self = saturatingSub(self, dur);
    }
    // A group made only by the lookup (a parent whose row changed since): no call of it counted.
    out.erase(std::remove_if(out.begin(), out.end(), [](const OpAggregator::Group& g) { return g.calls == 0; }),
              out.end());
    return out;
  }
  int64_t ops() const { return groups_.selected(); }

 private:
  static constexpr size_t kRecent = size_t{1} << 14;
  struct Recent {
    int64_t id = -1;
    int32_t group = -1;
  };
  OpAggregator groups_{/*by_shapes=*/true};
  std::vector<Recent> recent_;  // by id modulo kRecent: the last op of each slot
  std::unordered_map<int64_t, int64_t> waiting_;
  // By id modulo kRecent: how many of waiting_'s ids fall there (most ops need no lookup).
  std::vector<uint32_t> waiting_slots_;
};

}  // namespace npuscope
