// The fused optimizers as one Python class, FusedOptimizer, built by name. npuscope.optimizers
// wraps it in torch.optim.Optimizer subclasses that keep torch's param_groups and sync them in.
#include "npuscope/optim/fused_optimizers.h"

#include "bindings.h"

namespace npuscope::python {

void bindOptim(py::module_& root) {
  py::module_ m = root.def_submodule("optim", "the fused optimizers on combined tensors");
  m.def("names", &optim::fusedOptimizerNames);
  py::class_<optim::NpuFusedOptimizer, std::shared_ptr<optim::NpuFusedOptimizer>>(m, "FusedOptimizer")
      .def(py::init([](const std::string& name, const std::vector<std::vector<at::Tensor>>& groups,
                       const std::vector<optim::OptionValues>& options, bool masterWeights) {
             optim::FusedOptimizerConfig config;
             config.masterWeights = masterWeights;
             return optim::makeFusedOptimizer(name, groups, options, config);
           }),
           py::arg("name"), py::arg("groups"), py::arg("options"), py::arg("master_weights") = false)
      .def_property_readonly("name", &optim::NpuFusedOptimizer::name)
      .def_property_readonly("step_count", &optim::NpuFusedOptimizer::stepCount)
      .def_property_readonly("num_groups", &optim::NpuFusedOptimizer::numGroups)
      .def_property_readonly("has_master_weights", &optim::NpuFusedOptimizer::hasMasterWeights)
      .def("params", &optim::NpuFusedOptimizer::params)
      .def("stepped_params", &optim::NpuFusedOptimizer::steppedParams)
      .def("step", [](optim::NpuFusedOptimizer& o) { return o.step(); })
      .def("zero_grad", &optim::NpuFusedOptimizer::zeroGrad)
      .def("clip_grad_norm", &optim::NpuFusedOptimizer::clipGradNorm, py::arg("max_norm"))
      .def("refresh_model_params", &optim::NpuFusedOptimizer::refreshModelParams)
      .def("group_options", &optim::NpuFusedOptimizer::groupOptionValues, py::arg("group"))
      .def("set_group_options", &optim::NpuFusedOptimizer::setGroupOptionValues, py::arg("group"), py::arg("values"))
      .def("state_dict", &optim::NpuFusedOptimizer::stateDict)
      .def("load_state_dict", &optim::NpuFusedOptimizer::loadStateDict, py::arg("state"));
}

}  // namespace npuscope::python
