// The machinery shared by the eight fused optimizers: parameter banks on combined tensors,
// optional fp32 master weights, lazily created state buffers, the step protocol (found-inf skip,
// step counter) and state_dict / load_state_dict.
//
// Construction combines the parameters: one bank per (dtype, device), holding a flat buffer of
// the parameters (which are re-pointed to views of it), a flat buffer of their gradients (each
// parameter's .grad becomes a view), and, with master weights, fp32 copies of both. Optimizer
// state lives in more flat buffers with the same layout, so a step is one pass over a handful of
// flat buffers, chunked over the intra-op threads.
//
// Caveats shared with torch_npu's fused optimizers: parameters must not be re-allocated after
// construction (moving the model, assigning a new tensor); step() checks and refuses. Every
// parameter is stepped, including ones whose grad stayed zero because they took no part in the
// forward pass (torch skips parameters whose grad is undefined). Updates are written through
// the flat buffers, so parameters' autograd version counters do not move.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "npuscope/optim/combined_tensor.h"

namespace npuscope::optim {

struct FusedOptimizerConfig {
  // For fp16/bf16 parameters, step fp32 master copies and refresh the model's parameters from
  // them after every step (apex O2). fp32 parameters are stepped directly either way. Without
  // masters, low-precision parameters and their state are stepped in their own dtype (the
  // arithmetic is fp32 per element).
  bool masterWeights = false;
};

// Everything needed to resume bit-exactly, as named tensors so any torch archive can hold it:
//   "step"                  int64 scalar, steps taken
//   "group.<g>.<option>"    float64 scalar per hyper-parameter of group g (booleans as 0/1)
//   "param.<i>.<slot>"      per-parameter state (e.g. "param.3.exp_avg"), a clone
//   "param.<i>.master"      the fp32 master of parameter i, with master weights
// Parameter indices count through the groups in construction order.
using StateDict = std::map<std::string, at::Tensor>;

// One (dtype, device) slice of the optimizer's parameters.
struct ParamBank {
  std::vector<size_t> paramIndices;      // global index of each tensor of the layout
  std::vector<int32_t> tensorGroup;      // param group of each tensor of the layout
  CombinedTensor params;                 // the model's parameters (they are views of it)
  CombinedTensor grads;                  // the model's gradients (their .grad are views of it)
  CombinedTensor masters;                // fp32 masters, when master weights apply to this bank
  CombinedTensor masterGrads;            // fp32 master gradients, likewise
  std::vector<at::Tensor> masterParams;  // views of `masters`, each with its .grad a view of masterGrads
  std::map<std::string, CombinedTensor> state;  // optimizer state by slot name

  bool hasMasters() const { return masters.defined(); }
  // What the optimizer updates, and the gradients it reads.
  const CombinedTensor& stepped() const { return hasMasters() ? masters : params; }
  const CombinedTensor& steppedGrads() const { return hasMasters() ? masterGrads : grads; }
};

class NpuFusedOptimizer {
 public:
  virtual ~NpuFusedOptimizer();
  NpuFusedOptimizer(const NpuFusedOptimizer&) = delete;
  NpuFusedOptimizer& operator=(const NpuFusedOptimizer&) = delete;

  // torch_npu's class name, e.g. "NpuFusedAdam".
  virtual const char* name() const = 0;

  // One optimizer step. When `foundInf` is defined and non-zero the step is a no-op (parameters,
  // state and step count untouched) and step() returns false. With master weights, gradients
  // not staged by unscaleGrads() since the last step are copied from the model first.
  bool step(const at::Tensor& foundInf = {});

  // Zeroes every gradient buffer (model and master) in one pass each; grads stay views.
  void zeroGrad();

  // AMP's unscale: stepped grads = model grads * scale (fp16 -> fp32 masters, or in place), and
  // `foundInf` set when a result is non-finite. Stages the master grads for the next step().
  void unscaleGrads(double scale, const at::Tensor& foundInf = {});

  // clip_grad_norm_ over the stepped gradients (the masters' with master weights, staging them
  // first); returns the total norm before clipping.
  double clipGradNorm(double maxNorm);

  // Copies the fp32 masters into the model's low-precision parameters (done by every step; call
  // it after loadStateDict() to make the model match restored masters).
  void refreshModelParams();

  int64_t stepCount() const { return step_; }
  size_t numGroups() const { return groupSizes_.size(); }
  virtual double lr(size_t group) const = 0;
  virtual void setLr(size_t group, double lr) = 0;
  // Sets every group's learning rate (schedulers call this between steps).
  void setLr(double lr);

  // The model's parameters in construction order, and what the optimizer steps for each (the
  // fp32 master view with master weights, the parameter itself otherwise).
  const std::vector<at::Tensor>& params() const { return params_; }
  std::vector<at::Tensor> steppedParams() const;
  bool hasMasterWeights() const;

  const std::vector<ParamBank>& banks() const { return banks_; }
  // Flat gradient buffers: the model's, and the ones the step reads.
  std::vector<CombinedTensor> modelGradBuffers() const;
  std::vector<CombinedTensor> steppedGradBuffers() const;

  // Hyper-parameters of group g by their state-dict names ("lr", "beta1", "weight_decay", ...;
  // booleans and enums as numbers), and one of them set by name. A front-end keeping its own
  // copy of the groups (Python's param_groups) syncs through these. Values are set together and
  // then validated; an unknown key, or values the optimizer refuses, throw c10::Error naming
  // them and leave the group unchanged.
  std::vector<std::pair<std::string, double>> groupOptionValues(size_t group) const;
  void setGroupOptionValues(size_t group, const std::vector<std::pair<std::string, double>>& values);

  StateDict stateDict() const;
  // Restores a stateDict() of an optimizer built over parameters of the same shapes, dtypes and
  // grouping. State slots missing from `dict` are dropped, as if never created.
  void loadStateDict(const StateDict& dict);

 protected:
  NpuFusedOptimizer(const std::vector<std::vector<at::Tensor>>& groupParams, FusedOptimizerConfig config);

  // Performs step number `step` (1-based) on every bank. Grads are ready; called only when the
  // step is not skipped.
  virtual void stepImpl(int64_t step) = 0;
  // Hyper-parameters of group g as named doubles, and back (for the state dict).
  virtual std::vector<std::pair<std::string, double>> groupOptions(size_t group) const = 0;
  virtual void setGroupOption(size_t group, const std::string& key, double value) = 0;
  // Throws c10::Error naming the bad option when group g's options are invalid.
  virtual void validateGroup(size_t group) const = 0;

  std::vector<ParamBank>& mutableBanks() { return banks_; }
  // The state slot `name` of `bank`, created filled with `init` (padding zero) when missing;
  // `created` tells whether this call created it.
  const CombinedTensor& stateSlot(ParamBank& bank, const std::string& name, double init = 0.0,
                                  bool* created = nullptr);

 private:
  void verifyCombined();
  void stageMasterGrads(double scale, const at::Tensor& foundInf);

  std::vector<at::Tensor> params_;
  std::vector<size_t> groupSizes_;
  std::vector<ParamBank> banks_;
  std::vector<std::pair<size_t, size_t>> paramLocation_;  // param index -> (bank, tensor)
  int64_t step_ = 0;
  bool gradsStaged_ = false;
};

// Option fields are doubles, bools or enums; the state dict stores all of them as doubles.
template <typename T>
double optionToDouble(T v) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<double>(static_cast<std::underlying_type_t<T>>(v));
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
T optionFromDouble(double v) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else {
    return static_cast<T>(v);
  }
}

// A parameter group: its tensors and, optionally, options replacing the optimizer's defaults.
template <typename Options>
struct ParamGroup {
  std::vector<at::Tensor> params;
  std::optional<Options> options;
};

// Per-group options storage shared by the eight optimizers. Options types expose their fields
// through `template <class F> void visit(F&& f)`, calling f(name, field&) for each double and
// bool field.
template <typename Options>
class FusedOptimizerWithOptions : public NpuFusedOptimizer {
 public:
  Options& options(size_t group) { return groups_.at(group); }
  const Options& options(size_t group) const { return groups_.at(group); }
  double lr(size_t group) const override { return groups_.at(group).lr; }
  void setLr(size_t group, double lr) override { groups_.at(group).lr = lr; }
  using NpuFusedOptimizer::setLr;

 protected:
  FusedOptimizerWithOptions(const std::vector<ParamGroup<Options>>& groups, const Options& defaults,
                            FusedOptimizerConfig config)
      : NpuFusedOptimizer(paramsOf(groups), config) {
    for (const auto& g : groups) {
      groups_.push_back(g.options ? *g.options : defaults);
      groups_.back().validate();
    }
  }

  std::vector<std::pair<std::string, double>> groupOptions(size_t group) const override {
    std::vector<std::pair<std::string, double>> out;
    Options copy = groups_.at(group);
    copy.visit([&](const char* key, auto& field) { out.emplace_back(key, optionToDouble(field)); });
    return out;
  }
  void setGroupOption(size_t group, const std::string& key, double value) override {
    groups_.at(group).visit([&](const char* k, auto& field) {
      if (key == k) field = optionFromDouble<std::decay_t<decltype(field)>>(value);
    });
  }
  void validateGroup(size_t group) const override { groups_.at(group).validate(); }

  std::vector<Options> groups_;

 private:
  static std::vector<std::vector<at::Tensor>> paramsOf(const std::vector<ParamGroup<Options>>& groups) {
    std::vector<std::vector<at::Tensor>> out;
    for (const auto& g : groups) out.push_back(g.params);
    return out;
  }
};

}  // namespace npuscope::optim
