// A torch-free generator of realistic npuscope traces for the GUI's tests and benchmark: a CNN
// trained with AMP O1 on npu:0, written through core's TraceWriter exactly as a recording
// session writes it. Per step: the forward pass on the main thread (casts, conv / batch-norm /
// relu / pool blocks, linear layers, the loss), the backward pass on an autograd thread
// (evaluate_function -> XBackward0 -> aten ops, sharing the forward ops' sequence numbers), and
// the fused optimizer step; leaf ops on the npu get a modeled device time on one serial stream,
// so the stream lags the host on heavy layers and idles on host-bound ones. Steps carry a
// decreasing loss and a dynamic loss scale that halves on overflow steps (which are skipped and
// get overflow events). Optional tensor dumps (fp16 / fp32 payloads, one with NaN and inf).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "npuscope/store/clock.h"
#include "npuscope/store/records.h"
#include "npuscope/store/status.h"
#include "npuscope/store/string_table.h"
#include "npuscope/store/trace_writer.h"

namespace npuscope::testing {

struct SyntheticRunOptions {
  int64_t steps = 12;
  int blocks = 2;                 // conv blocks per forward pass (ops per step grow with it)
  std::string opt_level = "O1";
  uint64_t seed = 7;
  std::vector<int64_t> overflow_steps = {3, 8};  // also every 97th step when steps > 97
  bool dumps = true;              // tensor dumps for steps 2 and 3
  bool end_run = true;            // false: leave the run "running"
  int64_t start_ns = -1;          // monotonic start; -1: now minus the run's expected span
};

struct SyntheticRunInfo {
  int64_t run_id = 0;
  int64_t ops = 0;
  int64_t begin_ns = 0, end_ns = 0;
};

namespace detail {

inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    return static_cast<uint16_t>(sign | (mant >> (14 - exp)));
  }
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13));
}

// Emits ops into per-thread buffers with ids, depths, parents and the modeled stream.
class OpEmitter {
 public:
  OpEmitter(TraceWriter& w, uint64_t seed) : w_(w), rng_(seed) {}

  struct Open {
    int64_t id, start;
    uint64_t thread;
  };

  int64_t nextId() { return ++id_; }
  std::mt19937_64& rng() { return rng_; }
  int64_t jitter(int64_t base) {
    std::uniform_int_distribution<int64_t> d(-base / 5, base / 5);
    return std::max<int64_t>(200, base + d(rng_));
  }

  // Records a complete op [start, start + dur) on `thread` under `parent` (-1 top level).
  OpRecord make(uint64_t thread, const char* name, const char* shapes, const char* dtypes, int64_t start,
                int64_t dur, int64_t parent, int depth, int64_t seq, bool backward, int step, bool npu) {
    OpRecord r;
    r.id = nextId();
    r.parent_id = parent;
    r.start_ns = start;
    r.dur_ns = dur;
    r.seq_nr = seq;
    r.thread_id = thread;
    r.step = step;
    r.name_id = intern(name);
    r.shapes_id = shapes ? intern(shapes) : 0;
    r.dtypes_id = dtypes ? intern(dtypes) : 0;
    r.depth = static_cast<int16_t>(depth);
    r.device = npu ? 0 : -1;
    r.is_backward = backward ? 1 : 0;
    return r;
  }

  // Modeled device time of a leaf op submitted at `host_end`.
  void model(OpRecord& r, int64_t device_dur) {
    r.device_start_ns = std::max(r.start_ns + r.dur_ns, stream_free_);
    r.device_dur_ns = device_dur;
    stream_free_ = r.device_start_ns + device_dur;
  }

  void push(const OpRecord& r) {
    auto& buf = r.thread_id == 1 ? main_ : back_;
    if (!buf) buf = w_.takeBuffer();
    buf->records[buf->size++] = r;
    ++count_;
    if (buf->full()) w_.submit(buf);
  }
  void flush() {
    if (main_ && main_->size) w_.submit(main_);
    if (back_ && back_->size) w_.submit(back_);
  }
  int64_t count() const { return count_; }
  int64_t streamFree() const { return stream_free_; }

 private:
  uint32_t intern(const char* s) { return StringTable::global().intern(s); }
  TraceWriter& w_;
  std::mt19937_64 rng_;
  int64_t id_ = 0;
  int64_t count_ = 0;
  int64_t stream_free_ = 0;
  std::unique_ptr<OpBuffer> main_, back_;
};

struct Layer {
  const char* outer;   // the op the user calls, e.g. aten::conv2d
  const char* inner;   // what it dispatches to (nullptr: the outer op is the leaf)
  const char* leaf;    // the leaf op with device time
  const char* shapes;
  const char* dtypes;
  const char* backward;  // the autograd node name
  int64_t host_ns, device_ns;
};

}  // namespace detail

// Writes one run into `w` (already open). Returns what a test needs to check against.
inline StatusOr<SyntheticRunInfo> writeSyntheticRun(TraceWriter& w, const SyntheticRunOptions& o) {
  using detail::Layer;
  const int64_t start_ns = o.start_ns >= 0 ? o.start_ns : nowNs() - o.steps * (800'000 + 250'000 * o.blocks);
  RunInfo info;
  info.started_ns = start_ns;
  info.wall_start_ns = 1'700'000'000'000'000'000 + start_ns % 1'000'000'000'000'000;
  info.command = "train";
  info.model = "cnn";
  info.opt_level = o.opt_level;
  info.optimizer = "npu_fused_sgd";
  info.device = "npu:0";
  info.config_json = "{\"model\":\"cnn\",\"dataset\":\"fashion-mnist\",\"batch_size\":64,\"lr\":0.01,"
                     "\"momentum\":0.9,\"opt_level\":\"" + o.opt_level + "\",\"loss_scale\":\"dynamic\",\"steps\":" +
                     std::to_string(o.steps) + ",\"seed\":" + std::to_string(o.seed) + "}";
  auto run = w.beginRun(info);
  if (!run.isOk()) return run.status();
  SyntheticRunInfo out;
  out.run_id = run.value();
  out.begin_ns = start_ns;

  detail::OpEmitter e(w, o.seed);
  std::vector<Layer> layers;
  for (int b = 0; b < o.blocks; ++b) {
    const bool first = b == 0;
    layers.push_back({"aten::conv2d", "aten::convolution", "aten::npu_convolution",
                      first ? "[[64, 1, 28, 28], [16, 1, 3, 3], [16], [], [], [], []]"
                            : "[[64, 16, 14, 14], [16, 16, 3, 3], [16], [], [], [], []]",
                      "c10::Half, c10::Half, c10::Half, , , , Scalar", "ConvolutionBackward0", 38'000, 95'000});
    layers.push_back({"aten::batch_norm", "aten::_batch_norm_impl_index", "aten::native_batch_norm",
                      "[[64, 16, 28, 28], [16], [16], [16], [16], [], [], [], []]",
                      "c10::Half, float, float, float, float, Scalar, Scalar, Scalar, Scalar",
                      "NativeBatchNormBackward0", 24'000, 30'000});
    layers.push_back({"aten::relu", nullptr, "aten::relu", "[[64, 16, 28, 28]]", "c10::Half", "ReluBackward0",
                      9'000, 8'000});
    layers.push_back({"aten::max_pool2d", nullptr, "aten::max_pool2d_with_indices",
                      "[[64, 16, 28, 28], [], [], [], [], []]", "c10::Half, , , , , Scalar",
                      "MaxPool2DWithIndicesBackward0", 14'000, 12'000});
  }
  layers.push_back({"aten::flatten", nullptr, "aten::view", "[[64, 16, 7, 7], [], []]", "c10::Half, Scalar, Scalar",
                    "ViewBackward0", 3'000, -1});
  layers.push_back({"aten::linear", "aten::t", "aten::addmm", "[[64, 784], [128, 784], [128]]",
                    "c10::Half, c10::Half, c10::Half", "AddmmBackward0", 30'000, 22'000});
  layers.push_back({"aten::relu", nullptr, "aten::relu", "[[64, 128]]", "c10::Half", "ReluBackward0", 7'000, 3'000});
  layers.push_back({"aten::linear", "aten::t", "aten::addmm", "[[64, 128], [10, 128], [10]]",
                    "c10::Half, c10::Half, c10::Half", "AddmmBackward0", 26'000, 9'000});

  int64_t t = start_ns + 50'000;
  double scale = 65536.0;
  int clean = 0;
  std::normal_distribution<double> noise(0.0, 0.03);
  std::vector<TensorDumpRecord> dumps;
  int64_t mem_alloc = 40 << 20, mem_reserved = 64 << 20;
  std::vector<MemoryRecord> mem;

  auto overflowAt = [&](int64_t s) {
    if (std::find(o.overflow_steps.begin(), o.overflow_steps.end(), s) != o.overflow_steps.end()) return true;
    return o.steps > 97 && s > 0 && s % 97 == 0;
  };
  auto alloc = [&](int64_t ts, int64_t bytes) {
    mem_alloc = std::max<int64_t>(1 << 20, mem_alloc + bytes);
    mem_reserved = std::max(mem_reserved, mem_alloc + (8 << 20));
    MemoryRecord m;
    m.ts_ns = ts;
    m.device = 0;
    m.allocated = static_cast<uint64_t>(mem_alloc);
    m.reserved = static_cast<uint64_t>(mem_reserved);
    mem.push_back(m);
  };

  for (int64_t step = 0; step < o.steps; ++step) {
    const int s32 = static_cast<int>(step);
    const int64_t step_start = t;
    const bool overflow = overflowAt(step);
    struct Fwd {
      int64_t seq;
      const Layer* layer;
    };
    std::vector<Fwd> fwd;
    int64_t seq = step * 1000;

    // Forward: a cast of the input, then the layers, then the loss.
    auto leafOp = [&](uint64_t th, const char* name, const char* shapes, const char* dtypes, int64_t start,
                      int64_t host, int64_t parent, int depth, int64_t sq, bool bwd, int64_t dev) {
      OpRecord r = e.make(th, name, shapes, dtypes, start, host, parent, depth, sq, bwd, s32, true);
      if (dev > 0) e.model(r, e.jitter(dev));
      e.push(r);
      if (dev > 0) alloc(start + host, bwd ? -(1 << 16) : (1 << 18));
      return r;
    };
    {
      const int64_t d = e.jitter(12'000);
      OpRecord to = e.make(1, "aten::to", "[[64, 1, 28, 28], [], [], [], []]", "float, Scalar, Scalar, Scalar, ",
                           t, d, -1, 0, -1, false, s32, true);
      OpRecord copy = e.make(1, "aten::_to_copy", "[[64, 1, 28, 28], [], [], [], [], []]",
                             "float, Scalar, , , , ", t + 500, d - 1000, to.id, 1, -1, false, s32, true);
      leafOp(1, "aten::copy_", "[[64, 1, 28, 28], [64, 1, 28, 28], []]", "c10::Half, float, Scalar", t + 900,
             d - 2000, copy.id, 2, -1, false, 6'000);
      e.push(copy);
      e.push(to);
      t += d + 1'500;
    }
    for (const Layer& L : layers) {
      const int64_t sq = ++seq;
      const int64_t host = e.jitter(L.host_ns);
      OpRecord outer = e.make(1, L.outer, L.shapes, L.dtypes, t, host, -1, 0, L.inner ? -1 : sq, false, s32, true);
      if (L.inner) {
        OpRecord inner = e.make(1, L.inner, L.shapes, L.dtypes, t + 700, host / 3, outer.id, 1, -1, false, s32, true);
        e.push(inner);
        if (std::strcmp(L.outer, "aten::conv2d") == 0) {
          leafOp(1, "aten::_convolution", L.shapes, L.dtypes, t + 900, host / 3 - 400, inner.id, 2, -1, false, 0);
        }
        leafOp(1, L.leaf, L.shapes, L.dtypes, t + host / 3 + 1'200, host - host / 3 - 2'000, outer.id, 1, sq, false,
               L.device_ns);
      } else if (std::strcmp(L.leaf, L.outer) != 0) {
        leafOp(1, L.leaf, L.shapes, L.dtypes, t + 600, host - 1'200, outer.id, 1, sq, false, L.device_ns);
      } else if (L.device_ns > 0) {
        e.model(outer, e.jitter(L.device_ns));
        alloc(t + host, 1 << 17);
      }
      e.push(outer);
      fwd.push_back({sq, &L});
      t += host + e.jitter(2'500);
    }
    {
      const int64_t sq = ++seq;
      const int64_t d = e.jitter(40'000);
      OpRecord ce = e.make(1, "aten::cross_entropy_loss", "[[64, 10], [64], [], [], [], []]",
                           "c10::Half, long int, , Scalar, Scalar, Scalar", t, d, -1, 0, -1, false, s32, true);
      OpRecord ls = e.make(1, "aten::log_softmax", "[[64, 10], [], []]", "c10::Half, Scalar, ", t + 800,
                           d / 2 - 1'000, ce.id, 1, -1, false, s32, true);
      leafOp(1, "aten::_log_softmax", "[[64, 10], [], []]", "float, Scalar, Scalar", t + 1'500, d / 2 - 3'000, ls.id, 2,
             sq, false, 4'000);
      e.push(ls);
      leafOp(1, "aten::nll_loss_nd", "[[64, 10], [64], [], [], []]", "float, long int, , Scalar, Scalar",
             t + d / 2 + 500, d / 2 - 1'500, ce.id, 1, sq + 1, false, 3'000);
      e.push(ce);
      fwd.push_back({sq, nullptr});
      t += d + 2'000;
      const int64_t ms = e.jitter(8'000);
      leafOp(1, "aten::mul", "[[], []]", "float, Scalar", t, ms, -1, 0, ++seq, false, 2'000);
      t += ms + 3'000;
    }

    // Backward on the autograd thread (id 2): nodes in reverse order of the forward pass.
    int64_t bt = t + 5'000;
    int64_t first_backward_leaf = -1;  // where an overflow step's first overflow happens
    for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
      const char* node = it->layer ? it->layer->backward : "NllLossBackward0";
      const int64_t dev = it->layer ? it->layer->device_ns * 2 : 6'000;
      const int64_t host = e.jitter(it->layer ? it->layer->host_ns + 15'000 : 25'000);
      const std::string eval = std::string("autograd::engine::evaluate_function: ") + node;
      OpRecord ev = e.make(2, eval.c_str(), nullptr, nullptr, bt, host, -1, 0, it->seq, true, s32, false);
      OpRecord nd = e.make(2, node, nullptr, nullptr, bt + 1'000, host - 2'000, ev.id, 1, it->seq, true, s32, false);
      const char* inner = "aten::mul";
      if (it->layer && std::strstr(node, "Addmm")) inner = "aten::mm";
      else if (it->layer && std::strstr(node, "Convolution")) inner = "aten::convolution_backward";
      else if (it->layer && std::strstr(node, "BatchNorm")) inner = "aten::native_batch_norm_backward";
      else if (it->layer && std::strstr(node, "Relu")) inner = "aten::threshold_backward";
      else if (it->layer && std::strstr(node, "MaxPool")) inner = "aten::max_pool2d_with_indices_backward";
      else if (it->layer && std::strstr(node, "View")) inner = "aten::reshape";
      const char* shp = it->layer ? it->layer->shapes : "[[], [64, 10]]";
      if (dev > 0 && std::strcmp(inner, "aten::mm") == 0) {
        const int64_t half = (host - 6'000) / 2;
        leafOp(2, "aten::mm", "[[64, 10], [10, 128]]", "c10::Half, c10::Half", bt + 2'000, half, nd.id, 2, -1, true,
               dev / 2);
        leafOp(2, "aten::mm", "[[10, 64], [64, 128]]", "c10::Half, c10::Half", bt + 3'000 + half, half, nd.id, 2, -1,
               true, dev / 2);
      } else {
        const OpRecord leaf = leafOp(2, inner, shp, it->layer ? it->layer->dtypes : "float, float", bt + 2'000,
                                     host - 5'000, nd.id, 2, -1, true, dev > 0 ? dev : -1);
        if (first_backward_leaf < 0) first_backward_leaf = leaf.id;
      }
      e.push(nd);
      e.push(ev);
      bt += host + e.jitter(1'500);
      if (it->layer && it->layer->device_ns > 0 && std::strcmp(it->layer->outer, "aten::relu") != 0 &&
          std::strcmp(it->layer->outer, "aten::max_pool2d") != 0) {
        const int64_t ah = e.jitter(9'000);
        OpRecord aev = e.make(2, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", nullptr,
                              nullptr, bt, ah, -1, 0, -1, true, s32, false);
        OpRecord acc = e.make(2, "torch::autograd::AccumulateGrad", nullptr, nullptr, bt + 500, ah - 1'000, aev.id, 1,
                              -1, true, s32, false);
        leafOp(2, "aten::add_", "[[16, 16, 3, 3], [16, 16, 3, 3], []]", "float, c10::Half, Scalar", bt + 900,
               ah - 2'000, acc.id, 2, -1, true, 2'500);
        e.push(acc);
        e.push(aev);
        bt += ah + 800;
      }
    }
    t = bt + 10'000;

    // Optimizer step (amp unscale + fused SGD), skipped on overflow after the check.
    {
      const int64_t d = overflow ? e.jitter(30'000) : e.jitter(90'000);
      OpRecord opt = e.make(1, "Optimizer.step#NpuFusedSGD.step", nullptr, nullptr, t, d, -1, 0, -1, false, s32, false);
      const int64_t u = e.jitter(20'000);
      leafOp(1, "aten::_amp_foreach_non_finite_check_and_unscale_", "[[], [], []]", "TensorList, float, float",
             t + 1'000, std::min(u, d - 3'000), opt.id, 1, -1, false, 15'000);
      if (!overflow) {
        leafOp(1, "aten::_foreach_mul_", "[[], []]", "TensorList, Scalar", t + u + 3'000, 25'000, opt.id, 1, -1, false,
               20'000);
        leafOp(1, "aten::_foreach_add_", "[[], [], []]", "TensorList, TensorList, Scalar", t + u + 30'000,
               d - u - 32'000, opt.id, 1, -1, false, 30'000);
      }
      e.push(opt);
      t += d + 4'000;
      const int64_t zd = e.jitter(6'000);
      leafOp(1, "aten::zero_", "[[]]", "TensorList", t, zd, -1, 0, -1, false, 3'000);
      t += zd + 20'000;
    }
    // The host waits for the stream at the step's end (loss.item()).
    t = std::max(t, e.streamFree()) + 15'000;

    StepRecord sr;
    sr.step = step;
    sr.start_ns = step_start;
    sr.dur_ns = t - step_start;
    sr.loss = 2.3 * std::exp(-static_cast<double>(step) / 60.0) + 0.35 + noise(e.rng());
    sr.loss_scale = scale;
    sr.overflow = overflow;
    sr.skipped = overflow;
    sr.lr = 0.01;
    sr.grad_norm = overflow ? std::numeric_limits<double>::infinity() : 1.5 + noise(e.rng());
    w.addStep(sr);
    // As a recording session does at a step boundary: never let the queue overflow (a
    // generator outpaces the writer, whose full queue would drop whole buffers of ops).
    if (step % 16 == 15) w.waitForBacklog(64 * 4096);
    if (overflow) {
      OverflowRecord ov;
      ov.step = step;
      ov.ts_ns = t - 100'000;
      ov.source = "float_status";
      ov.op_name = "aten::addmm";
      ov.detail = "float status register set during backward (loss scale " + std::to_string(static_cast<int64_t>(scale)) + ")";
      w.addOverflow(ov);
      OverflowRecord ng = ov;
      ng.source = "nonfinite_grad";
      ng.op_name = "AddmmBackward0";
      ng.detail = "inf in grad of fc2.weight";
      w.addOverflow(ng);
      // As float-status tracking records it: the step's first op whose result overflowed (the
      // loss gradient's mul, scaled past fp16), linked to its op row.
      OverflowRecord first;
      first.step = step;
      first.ts_ns = ov.ts_ns - 50'000;
      first.source = "first_op";
      first.op_name = "aten::mul";
      first.op_id = first_backward_leaf;
      first.detail = "{\"phase\": \"backward\", \"device\": 0, \"dtype\": \"float16\", \"rounding\": true, "
                     "\"numel\": 640, \"out_max_abs\": 131072, \"out_inf\": 12, \"out_nan\": 0, "
                     "\"in_max_abs\": 2.5, \"in_inf\": 0, \"in_nan\": 0}";
      w.addOverflow(first);
      scale = std::max(1.0, scale / 2);
      clean = 0;
    } else if (++clean == 25) {
      scale = std::min(scale * 2, 16777216.0);
      clean = 0;
    }
    alloc(t - 1'000, -(3 << 20));

    if (o.dumps && (step == 2 || step == 3)) {
      // Dumps of the last linear layer's addmm and the relu before it.
      auto tensor = [&](const char* op, const char* type, const char* io, int idx, const std::string& dtype,
                        int64_t n, double center, double spread, int nans, int infs) {
        TensorDumpRecord d;
        d.step = step;
        d.op_name = op;
        d.op_type = type;
        d.io = io;
        d.idx = idx;
        d.dtype = dtype;
        d.shape = "[" + std::to_string(n / 16) + ", 16]";
        std::normal_distribution<double> v(center, spread);
        std::vector<double> vals(static_cast<size_t>(n));
        for (auto& x : vals) x = v(e.rng());
        for (int k = 0; k < nans; ++k) vals[static_cast<size_t>(k * 7 % n)] = std::nan("");
        for (int k = 0; k < infs; ++k) vals[static_cast<size_t>((k * 13 + 3) % n)] = std::numeric_limits<double>::infinity();
        d.has_stats = true;
        double mn = std::numeric_limits<double>::infinity(), mx = -mn, sum = 0, sq = 0;
        int64_t cnt = 0;
        for (double x : vals) {
          if (std::isnan(x)) {
            ++d.nan_count;
            continue;
          }
          if (std::isinf(x)) ++d.inf_count;
          mn = std::min(mn, x);
          mx = std::max(mx, x);
          sum += x;
          sq += x * x;
          ++cnt;
        }
        d.min = mn;
        d.max = mx;
        d.mean = cnt ? sum / static_cast<double>(cnt) : std::nan("");
        d.l2norm = std::sqrt(sq);
        if (dtype == "float16") {
          d.data.resize(vals.size() * 2);
          for (size_t k = 0; k < vals.size(); ++k) {
            const uint16_t h = detail::floatToHalf(static_cast<float>(vals[k]));
            std::memcpy(&d.data[k * 2], &h, 2);
          }
        } else {
          d.data.resize(vals.size() * 4);
          for (size_t k = 0; k < vals.size(); ++k) {
            const float f = static_cast<float>(vals[k]);
            std::memcpy(&d.data[k * 4], &f, 4);
          }
        }
        dumps.push_back(std::move(d));
      };
      const bool bad = overflow;
      tensor("relu.3.forward", "aten::relu", "input", 0, "float16", 2048, 0.1, 1.0, 0, 0);
      tensor("relu.3.forward", "aten::relu", "output", 0, "float16", 2048, 0.5, 0.6, 0, 0);
      tensor("addmm.2.forward", "aten::addmm", "input", 0, "float16", 1280, 0.0, 0.05, 0, 0);
      tensor("addmm.2.forward", "aten::addmm", "input", 1, "float16", 2048, 0.0, 0.8, 0, 0);
      tensor("addmm.2.forward", "aten::addmm", "output", 0, "float16", 640, 0.2, 3.0, bad ? 3 : 0, bad ? 5 : 0);
      tensor("nll_loss.0.forward", "aten::nll_loss_nd", "output", 0, "float32", 16, 1.2, 0.1, 0, 0);
      w.addTensorDumps(std::move(dumps));
      dumps.clear();
    }
    if (mem.size() > 4096) w.addMemory(std::move(mem)), mem.clear();
  }
  e.flush();
  if (!mem.empty()) w.addMemory(std::move(mem));
  out.ops = e.count();
  out.end_ns = t;
  if (o.end_run) {
    Status s = w.endRun("completed", "{\"final_loss\":0.41,\"test_accuracy\":0.8712,\"samples_per_second\":5210}");
    if (!s.isOk()) return s;
  } else {
    Status s = w.flush();
    if (!s.isOk()) return s;
  }
  return out;
}

// Creates (or appends to) `path` with one run. `steps_for_ops`: when > 0, choose the step count
// so that the run holds about that many ops.
inline StatusOr<SyntheticRunInfo> writeSyntheticFile(const std::string& path, SyntheticRunOptions o,
                                                     int64_t target_ops = 0) {
  if (target_ops > 0) {
    // Ops per step of this fixed layout: 17 + 10 per block forward, 17 + 18 per block backward
    // (with AccumulateGrad), 5 in the optimizer; overflow steps have 2 fewer.
    const int64_t per_step = 45 + 28 * static_cast<int64_t>(o.blocks);
    o.steps = std::max<int64_t>(1, target_ops / per_step);
  }
  auto w = TraceWriter::open(path);
  if (!w.isOk()) return w.status();
  return writeSyntheticRun(*w.value(), o);
}

}  // namespace npuscope::testing
