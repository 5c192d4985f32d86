// amp for Python: options resolved and applied by the C++ amp (loss scalers, O1 autocast key,
// master weights through the fused optimizers, combined gradients, overflow check); the
// Python side only walks nn.Modules and wires the context managers.
#include "npuscope/amp/amp.h"
#include "npuscope/dumper/dumper.h"

#include "bindings.h"

namespace npuscope::python {
namespace {

template <typename T>
std::optional<T> opt(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<T>();
}

// Options from a dict of apex's keyword names; values are already normalised to strings,
// numbers and booleans by npuscope.amp.
amp::Options toOptions(const py::dict& d) {
  amp::Options o;
  if (auto v = opt<std::string>(d, "opt_level")) {
    o.opt_level = valueOrThrow(amp::parseOptLevel(*v));
  }
  if (auto v = opt<std::string>(d, "cast_model_type")) o.cast_model_type = valueOrThrow(amp::parseCastType(*v));
  o.patch_ops = opt<bool>(d, "patch_torch_functions");
  o.keep_batchnorm_fp32 = opt<bool>(d, "keep_batchnorm_fp32");
  o.master_weights = opt<bool>(d, "master_weights");
  if (auto v = opt<std::string>(d, "loss_scale")) o.loss_scale = valueOrThrow(amp::parseLossScale(*v));
  o.dynamic_init_scale = opt<double>(d, "dynamic_init_scale");
  o.scale_growth_factor = opt<double>(d, "scale_growth_factor");
  o.scale_backoff_factor = opt<double>(d, "scale_backoff_factor");
  o.scale_window = opt<int64_t>(d, "scale_window");
  o.min_loss_scale = opt<double>(d, "min_loss_scale");
  o.max_loss_scale = opt<double>(d, "max_loss_scale");
  if (auto v = opt<int>(d, "num_losses")) o.num_losses = *v;
  o.combine_grad = opt<bool>(d, "combine_grad");
  if (auto v = opt<int>(d, "verbosity")) o.verbosity = *v;
  if (auto v = opt<std::string>(d, "low_precision")) o.low_precision = valueOrThrow(amp::parseCastType(*v));
  if (auto v = opt<std::string>(d, "overflow_check")) o.overflow_check = valueOrThrow(amp::parseOverflowCheck(*v));
  if (auto v = opt<std::string>(d, "cast_model_outputs")) {
    o.cast_model_outputs = valueOrThrow(amp::parseCastType(*v));
  }
  if (auto v = opt<bool>(d, "enabled")) o.enabled = *v;
  return o;
}

py::object dtypeName(at::ScalarType t) {
  if (t == amp::kNoCast) return py::none();
  return py::str(c10::toString(t));  // "Float", "Half", "BFloat16"
}

py::dict toDict(const amp::Properties& p) {
  py::dict d;
  d["enabled"] = p.enabled;
  d["opt_level"] = amp::optLevelName(p.opt_level);
  d["cast_model_type"] = dtypeName(p.cast_model_type);
  d["patch_torch_functions"] = p.patch_ops;
  d["keep_batchnorm_fp32"] = p.keep_batchnorm_fp32;
  d["master_weights"] = p.master_weights;
  d["loss_scale"] = p.loss_scaler.dynamic ? py::object(py::str("dynamic")) : py::object(py::float_(p.loss_scaler.static_scale));
  d["dynamic_init_scale"] = p.loss_scaler.init_scale;
  d["scale_growth_factor"] = p.loss_scaler.growth_factor;
  d["scale_backoff_factor"] = p.loss_scaler.backoff_factor;
  d["scale_window"] = p.loss_scaler.window;
  d["min_loss_scale"] = p.loss_scaler.min_scale > 0 ? py::object(py::float_(p.loss_scaler.min_scale)) : py::none();
  d["max_loss_scale"] = p.loss_scaler.max_scale;
  d["num_losses"] = p.num_losses;
  d["combine_grad"] = p.combine_grad;
  d["verbosity"] = p.verbosity;
  d["low_precision"] = dtypeName(p.low_precision);
  d["overflow_check"] = amp::overflowCheckName(p.overflow_check);
  d["cast_model_outputs"] = dtypeName(p.cast_model_outputs);
  d["describe"] = p.describe();
  return d;
}

py::dict toDict(const amp::StepInfo& s) {
  py::dict d;
  d["step"] = s.step;
  d["loss_scale"] = s.loss_scale;
  d["next_loss_scale"] = s.next_loss_scale;
  d["overflow"] = s.overflow;
  d["skipped"] = s.skipped;
  d["overflow_source"] = s.overflow_source;
  d["detail"] = s.detail;
  return d;
}

}  // namespace

void bindAmp(py::module_& root) {
  py::module_ m = root.def_submodule("amp", "apex-style amp (npuscope_amp)");
  m.def("resolve_options", [](const py::dict& d) {
    auto p = amp::resolveOptions(toOptions(d));
    if (!p.isOk()) throw py::value_error("amp.initialize: " + p.status().message());
    return toDict(p.value());
  });
  m.def(
      "initialize_fused",
      [](std::shared_ptr<optim::NpuFusedOptimizer> opt, const py::dict& d, const amp::NamedParams& names) {
        return toDict(amp::initialize(std::move(opt), toOptions(d), names));
      },
      py::arg("optimizer"), py::arg("options"), py::arg("names"));
  m.def(
      "initialize_plain",
      [](const std::vector<at::Tensor>& params, const py::dict& d, const amp::NamedParams& names) {
        auto p = toDict(amp::initialize(params, toOptions(d)));
        amp::set_param_names(names);
        return p;
      },
      py::arg("params"), py::arg("options"), py::arg("names"));
  m.def("is_initialized", &amp::isInitialized);
  m.def("properties", [] { return toDict(amp::properties()); });
  m.def("reset", &amp::reset);
  m.def("cast_input", &amp::castInput);
  m.def("cast_output", &amp::castOutput);
  m.def("loss_scale", &amp::loss_scale, py::arg("loss_id") = 0);
  m.def("state_dict", &amp::state_dict);
  m.def("load_state_dict", &amp::load_state_dict);
  m.def("step_fused", [](optim::NpuFusedOptimizer& o) {
    dumper::Dumper::UpdatePhase update;
    return toDict(amp::step(o));
  });
  m.def("step_plain", [](const std::function<void()>& fn) {
    dumper::Dumper::UpdatePhase update;
    return toDict(amp::step(fn));
  });

  m.def(
      "set_overflow_reducer",
      [](std::optional<std::function<bool(bool)>> reducer) { amp::setOverflowReducer(reducer ? *reducer : nullptr); },
      py::arg("reducer"), "multi-rank jobs: fn(local_overflow) -> the job's overflow (None: one rank)");

  py::class_<amp::ScaledLoss>(m, "ScaledLoss")
      .def_property_readonly("scaled", &amp::ScaledLoss::get)
      .def("finish",
           [](amp::ScaledLoss& s) {
             dumper::Dumper::UpdatePhase update;  // the unscale and overflow check
             const amp::LossResult r = s.finish();
             py::dict d;
             d["loss_id"] = r.loss_id;
             d["loss_scale"] = r.loss_scale;
             d["next_loss_scale"] = r.next_loss_scale;
             d["overflow"] = r.overflow;
             d["skip"] = r.skip;
             d["overflow_source"] = r.overflow_source;
             return d;
           })
      .def("abandon", &amp::ScaledLoss::abandon);
  m.def(
      "scale_loss",
      [](const at::Tensor& loss, std::shared_ptr<optim::NpuFusedOptimizer> opt, int lossId) {
        return opt ? new amp::ScaledLoss(amp::scale_loss(loss, *opt, lossId))
                   : new amp::ScaledLoss(amp::scale_loss(loss, lossId));
      },
      py::arg("loss"), py::arg("optimizer"), py::arg("loss_id") = 0, py::return_value_policy::take_ownership);

  // Context managers over the C++ guards (the guard lives between __enter__ and __exit__).
  using Forward = GuardScope<amp::ForwardScope>;
  py::class_<Forward>(m, "ForwardScope", "apex's patched forward: O1 casting while alive")
      .def(py::init([] { return new Forward{[] { return std::make_unique<amp::ForwardScope>(); }, nullptr}; }))
      .def("__enter__", [](Forward& f) { f.guard = f.make(); })
      .def("__exit__", [](Forward& f, py::args) { f.guard.reset(); });
  using Autocast = GuardScope<amp::AutocastGuard>;
  py::class_<Autocast>(m, "Autocast", "O1 casting of npu ops on this thread (torch.autocast semantics)")
      .def(py::init([](bool enabled, const std::string& dtypeName) {
             const at::ScalarType dtype = valueOrThrow(amp::parseCastType(dtypeName));
             return new Autocast{[=] { return std::make_unique<amp::AutocastGuard>(enabled, dtype); }, nullptr};
           }),
           py::arg("enabled") = true, py::arg("dtype") = "float16")
      .def("__enter__", [](Autocast& a) { a.guard = a.make(); })
      .def("__exit__", [](Autocast& a, py::args) { a.guard.reset(); });
  m.def("autocast_enabled", &amp::autocastEnabled);
  m.def("autocast_dtype", [] { return std::string(c10::toString(amp::autocastDtype())); });
  using Update = GuardScope<dumper::Dumper::UpdatePhase>;
  py::class_<Update>(m, "UpdatePhase", "the parameter update after backward (the dumper names its ops '.update')")
      .def(py::init([] { return new Update{[] { return std::make_unique<dumper::Dumper::UpdatePhase>(); }, nullptr}; }))
      .def("__enter__", [](Update& u) { u.guard = u.make(); })
      .def("__exit__", [](Update& u, py::args) { u.guard.reset(); });

  py::class_<amp::GradScaler>(m, "GradScaler")
      .def(py::init([](double init, double growth, double backoff, int64_t interval, bool enabled) {
             return new amp::GradScaler(amp::GradScalerOptions{init, growth, backoff, interval, enabled});
           }),
           py::arg("init_scale") = 65536.0, py::arg("growth_factor") = 2.0, py::arg("backoff_factor") = 0.5,
           py::arg("growth_interval") = 2000, py::arg("enabled") = true)
      .def("scale", &amp::GradScaler::scale)
      .def("unscale_fused", [](amp::GradScaler& g, optim::NpuFusedOptimizer& o) { g.unscale_(o); })
      .def("unscale_plain",
           [](amp::GradScaler& g, uintptr_t key, const std::string& name, const std::vector<at::Tensor>& grads) {
             g.unscale_(reinterpret_cast<const void*>(key), name, grads);
           })
      .def("step_fused",
           [](amp::GradScaler& g, optim::NpuFusedOptimizer& o) {
             dumper::Dumper::UpdatePhase update;
             return g.step(o);
           })
      .def("step_plain",
           [](amp::GradScaler& g, uintptr_t key, const std::string& name, const std::vector<at::Tensor>& grads,
              const std::function<void()>& fn) {
             dumper::Dumper::UpdatePhase update;
             return g.step(reinterpret_cast<const void*>(key), name, grads, fn);
           })
      .def("update", &amp::GradScaler::update, py::arg("new_scale") = py::none())
      .def("get_scale", &amp::GradScaler::get_scale)
      .def("get_growth_factor", &amp::GradScaler::get_growth_factor)
      .def("get_backoff_factor", &amp::GradScaler::get_backoff_factor)
      .def("get_growth_interval", &amp::GradScaler::get_growth_interval)
      .def("growth_tracker", &amp::GradScaler::growth_tracker)
      .def("is_enabled", &amp::GradScaler::is_enabled)
      .def("state_dict", &amp::GradScaler::state_dict)
      .def("load_state_dict", &amp::GradScaler::load_state_dict);
}

}  // namespace npuscope::python
