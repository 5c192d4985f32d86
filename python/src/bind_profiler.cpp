// Recording from Python: the LoopSession that `npuscope.profile` and `npuscope run` drive.
#include "npuscope/analysis/ascend_pt_export.h"
#include "npuscope/analysis/cluster.h"
#include "npuscope/profiler/loop_session.h"
#include "npuscope/store/trace_reader.h"

#include "bindings.h"

namespace npuscope::python {

void bindProfiler(py::module_& root) {
  py::module_ m = root.def_submodule("profiler", "recording into npuscope trace files");
  m.def("rank_file_path", &cluster::rankFilePath, "the trace file of a rank of a job given one path");
  // torch_npu.profiler's tensorboard_trace_handler: a run (or some of its steps) as an *_ascend_pt folder.
  m.def(
      "export_ascend_pt",
      [](const std::string& db, int64_t run_id, std::optional<int64_t> first, std::optional<int64_t> last,
         const std::string& dir, const std::string& worker, const std::string& config, const std::string& metadata) {
        AscendPtOptions o;
        o.run_id = run_id;
        if (first || last) o.steps = StepRange{first.value_or(0), last.value_or(std::numeric_limits<int64_t>::max())};
        o.worker_name = worker;
        o.config_json = config;
        o.metadata_json = metadata;
        auto written = [&]() -> StatusOr<AscendPtSummary> {
          py::gil_scoped_release release;  // errors are raised once the GIL is back
          ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::open(db));
          return exportAscendPt(*reader, dir, o);
        }();
        const AscendPtSummary s = valueOrThrow(std::move(written));
        py::dict d;
        d["folder"] = s.folder;
        d["host_ops"] = s.host_ops;
        d["kernels"] = s.kernels;
        d["steps"] = s.steps;
        d["memory_records"] = s.memory_records;
        d["collectives"] = s.collectives;
        return d;
      },
      py::arg("db"), py::arg("run_id"), py::arg("first_step") = py::none(), py::arg("last_step") = py::none(),
      py::arg("dir"), py::arg("worker_name") = "", py::arg("config_json") = "", py::arg("metadata_json") = "");
  // msprobe's entries linked to their ops (npuscope.msprobe inside a recording).
  m.def("watch_begin", &profiler::opWatchBegin, "watch which op the next call of this thread becomes; a handle");
  m.def("watch_end", &profiler::opWatchEnd, py::arg("handle"),
        "the op_events id of the first op the watched call started (-1: none, or not recorded)");
  m.def("current_op_id", &profiler::currentOpId, "the op_events id of the innermost op running on this thread, -1: none");
  m.def("check_schedule", [](const std::string& text) { throwIfError(profiler::Schedule::parse(text).status()); });
  py::class_<profiler::LoopSession>(m, "LoopSession")
      .def(py::init([](const std::string& path, const py::dict& run, const std::string& schedule, bool recordShapes,
                       bool recordMemory, const std::string& dumpConfig) {
             profiler::LoopSessionOptions o;
             o.session.path = path;
             auto str = [&](const char* k) { return run.contains(k) ? run[k].cast<std::string>() : std::string(); };
             o.session.run.command = str("command");
             o.session.run.model = str("model");
             o.session.run.opt_level = str("opt_level");
             o.session.run.optimizer = str("optimizer");
             o.session.run.device = str("device");
             o.session.run.config_json = str("config_json");
             if (run.contains("rank")) o.session.run.rank = run["rank"].cast<int64_t>();
             if (run.contains("world_size")) o.session.run.world_size = run["world_size"].cast<int64_t>();
             if (run.contains("job")) o.session.run.job = str("job");
             if (!schedule.empty()) {
               auto s = profiler::Schedule::parse(schedule);
               if (!s.isOk()) throw py::value_error("schedule: " + s.status().message());
               o.session.schedule = s.value();
             }
             o.session.record_shapes = recordShapes;
             o.session.record_memory = recordMemory;
             o.dump_config = dumpConfig;
             return valueOrThrow(profiler::LoopSession::start(o)).release();
           }),
           py::arg("path"), py::arg("run"), py::arg("schedule") = "", py::arg("record_shapes") = true,
           py::arg("record_memory") = true, py::arg("dump_config") = "")
      .def(
          "step",
          [](profiler::LoopSession& s, std::optional<double> loss, std::optional<double> lr,
             std::optional<double> gradNorm) { throwIfError(s.step(loss, lr, gradNorm)); },
          py::arg("loss") = py::none(), py::arg("lr") = py::none(), py::arg("grad_norm") = py::none())
      .def("amend_last_loss", &profiler::LoopSession::amendLastLoss, py::arg("loss"))
      .def_property_readonly("amp_step_pending", &profiler::LoopSession::ampStepPending)
      .def(
          "stop",
          [](profiler::LoopSession& s, const std::string& status, const std::string& results) {
            py::gil_scoped_release release;  // waits for the writer's last commit
            return s.stop(status, results);
          },
          py::arg("status") = "completed", py::arg("results_json") = "")
      .def(
          "flush",
          [](profiler::LoopSession& s) {
            py::gil_scoped_release release;  // waits for the writer's commit
            return s.flush();
          })
      .def_property_readonly("run_id", &profiler::LoopSession::runId)
      .def_property_readonly("current_step", &profiler::LoopSession::currentStep)
      .def_property_readonly("recorded_ops", &profiler::LoopSession::recordedOps)
      .def_property_readonly("dumping", &profiler::LoopSession::dumping)
      .def_property_readonly("dump_directory", &profiler::LoopSession::dumpDirectory);
  // A module call inside its scope (npuscope.profile's Module.__call__ while with_modules):
  // `fn(self, *args, **kwargs)` in a UserScope named `name`, ended however the call ends. One call
  // from Python: a scope object's construction, __enter__ and __exit__ added 2.8 us per module
  // call, this adds 1.1-1.3 us.
  m.def("call_in_scope", [](const char* name, py::handle fn, py::handle self, py::tuple args,
                            py::handle kwargs) -> py::object {
    const Py_ssize_t n = PyTuple_GET_SIZE(args.ptr());
    py::tuple full(n + 1);
    PyTuple_SET_ITEM(full.ptr(), 0, py::reinterpret_borrow<py::object>(self).release().ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyTuple_SET_ITEM(full.ptr(), i + 1, py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(args.ptr(), i)).release().ptr());
    }
    profiler::UserScope scope(name);
    PyObject* out = PyObject_Call(fn.ptr(), full.ptr(), kwargs.is_none() ? nullptr : kwargs.ptr());
    if (out == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(out);
  });
  py::class_<Status>(m, "Status")
      .def("ok", &Status::isOk)
      .def_property_readonly("message", &Status::message);
}

}  // namespace npuscope::python
