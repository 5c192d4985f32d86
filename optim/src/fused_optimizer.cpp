#include "npuscope/optim/fused_optimizer.h"

#include <unordered_set>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/scalar_tensor.h>

#include "chunk_plan.h"
#include "kernels/kernels.h"
#include "npuscope/optim/multi_tensor.h"

namespace npuscope::optim {
namespace {

bool isLowPrecision(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

std::string paramKey(size_t index, const std::string& slot) {
  return "param." + std::to_string(index) + "." + slot;
}

// Splits "param.<i>.<slot>"; false for other keys.
bool parseParamKey(const std::string& key, size_t* index, std::string* slot) {
  static const std::string kPrefix = "param.";
  if (key.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  const size_t dot = key.find('.', kPrefix.size());
  if (dot == std::string::npos || dot == kPrefix.size()) return false;
  size_t value = 0;
  for (size_t i = kPrefix.size(); i < dot; ++i) {
    if (key[i] < '0' || key[i] > '9') return false;
    value = value * 10 + static_cast<size_t>(key[i] - '0');
  }
  *index = value;
  *slot = key.substr(dot + 1);
  return !slot->empty();
}

// Re-points `holder`'s .grad to its view of `buffer` when something replaced it (a module's
// zero_grad(set_to_none), a user assignment, a backward that found no grad). A replacement's
// values are kept; a missing grad counts as zero.
void reattachGrad(const at::Tensor& holder, const CombinedTensor& buffer, size_t i) {
  const at::Tensor& g = holder.grad();
  if (g.defined() && g.data_ptr() == buffer.data(i) && g.is_contiguous() &&
      g.sizes() == at::IntArrayRef(buffer.layout().shape(i))) {
    return;
  }
  at::NoGradGuard noGrad;
  at::Tensor v = buffer.view(i);
  if (g.defined()) {
    v.copy_(g);
  } else {
    v.zero_();
  }
  holder.mutable_grad() = v;
}

}  // namespace

NpuFusedOptimizer::~NpuFusedOptimizer() = default;

NpuFusedOptimizer::NpuFusedOptimizer(const std::vector<std::vector<at::Tensor>>& groupParams,
                                     FusedOptimizerConfig config) {
  std::vector<int32_t> groupOf;
  for (size_t g = 0; g < groupParams.size(); ++g) {
    groupSizes_.push_back(groupParams[g].size());
    for (const auto& p : groupParams[g]) {
      TORCH_CHECK(p.defined(), "fused optimizer: parameter ", params_.size(), " is undefined");
      const auto t = p.scalar_type();
      TORCH_CHECK(t == at::kFloat || isLowPrecision(t), "fused optimizer: parameter ", params_.size(), " is ", t,
                  "; float32, float16 and bfloat16 are supported");
      params_.push_back(p);
      groupOf.push_back(static_cast<int32_t>(g));
    }
  }
  TORCH_CHECK(!params_.empty(), "fused optimizer got an empty parameter list");
  std::unordered_set<const c10::TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    TORCH_CHECK(seen.insert(params_[i].unsafeGetTensorImpl()).second, "fused optimizer: parameter ", i,
                " appears more than once");
  }

  // One bank per (dtype, device), in order of first appearance.
  std::vector<std::pair<at::ScalarType, at::Device>> keys;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::pair<at::ScalarType, at::Device> key{params_[i].scalar_type(), params_[i].device()};
    size_t b = 0;
    while (b < keys.size() && keys[b] != key) ++b;
    if (b == keys.size()) {
      keys.push_back(key);
      members.emplace_back();
    }
    members[b].push_back(i);
  }

  paramLocation_.resize(params_.size());
  for (size_t b = 0; b < keys.size(); ++b) {
    ParamBank bank;
    std::vector<at::Tensor> tensors;
    for (size_t i = 0; i < members[b].size(); ++i) {
      const size_t index = members[b][i];
      bank.paramIndices.push_back(index);
      bank.tensorGroup.push_back(groupOf[index]);
      tensors.push_back(params_[index]);
      paramLocation_[index] = {b, i};
    }
    bank.params = CombinedTensor::combine(tensors, /*repoint=*/true);
    bank.grads = CombinedTensor::filled(bank.params.layoutPtr(), bank.params.flat().options());
    attachGrads(tensors, bank.grads);
    if (config.masterWeights && isLowPrecision(keys[b].first)) {
      const auto fp32 = bank.params.flat().options().dtype(at::kFloat);
      bank.masters = CombinedTensor::filled(bank.params.layoutPtr(), fp32);
      scaleTensors(bank.params, bank.masters, 1.0);
      bank.masterGrads = CombinedTensor::filled(bank.params.layoutPtr(), fp32);
      bank.masterParams = bank.masters.views();
      attachGrads(bank.masterParams, bank.masterGrads);
    }
    banks_.push_back(std::move(bank));
  }
}

void NpuFusedOptimizer::verifyCombined() {
  for (const auto& bank : banks_) {
    for (size_t i = 0; i < bank.paramIndices.size(); ++i) {
      const at::Tensor& p = params_[bank.paramIndices[i]];
      TORCH_CHECK(p.data_ptr() == bank.params.data(i) && p.sizes() == at::IntArrayRef(bank.params.layout().shape(i)),
                  name(), ": parameter ", bank.paramIndices[i],
                  " no longer lives in the combined buffer (was it moved, re-assigned or resized?); "
                  "fused optimizers need parameters to stay where construction put them");
      reattachGrad(p, bank.grads, i);
      if (bank.hasMasters()) reattachGrad(bank.masterParams[i], bank.masterGrads, i);
    }
  }
}

void NpuFusedOptimizer::stageMasterGrads(double scale, const at::Tensor& foundInf) {
  for (const auto& bank : banks_) {
    if (bank.hasMasters()) scaleTensors(bank.grads, bank.masterGrads, scale, foundInf);
  }
}

bool NpuFusedOptimizer::step(const at::Tensor& foundInf) {
  if (foundInf.defined() && readFoundInf(foundInf)) {
    gradsStaged_ = false;
    return false;
  }
  verifyCombined();
  if (!gradsStaged_) stageMasterGrads(1.0, {});
  ++step_;
  stepImpl(step_);
  gradsStaged_ = false;
  return true;
}

void NpuFusedOptimizer::zeroGrad() {
  verifyCombined();
  for (const auto& bank : banks_) {
    bank.grads.zero();
    if (bank.hasMasters()) bank.masterGrads.zero();
  }
  gradsStaged_ = false;
}

void NpuFusedOptimizer::unscaleGrads(double scale, const at::Tensor& foundInf) {
  verifyCombined();
  for (const auto& bank : banks_) scaleTensors(bank.grads, bank.steppedGrads(), scale, foundInf);
  gradsStaged_ = true;
}

double NpuFusedOptimizer::clipGradNorm(double maxNorm) {
  verifyCombined();
  if (!gradsStaged_) stageMasterGrads(1.0, {});
  gradsStaged_ = true;
  return optim::clipGradNorm(steppedGradBuffers(), maxNorm);
}

void NpuFusedOptimizer::refreshModelParams() {
  for (const auto& bank : banks_) {
    if (bank.hasMasters()) scaleTensors(bank.masters, bank.params, 1.0);
  }
}

void NpuFusedOptimizer::setLr(double lr) {
  for (size_t g = 0; g < numGroups(); ++g) setLr(g, lr);
}

std::vector<at::Tensor> NpuFusedOptimizer::steppedParams() const {
  std::vector<at::Tensor> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [b, t] = paramLocation_[i];
    out[i] = banks_[b].hasMasters() ? banks_[b].masterParams[t] : params_[i];
  }
  return out;
}

bool NpuFusedOptimizer::hasMasterWeights() const {
  for (const auto& bank : banks_) {
    if (bank.hasMasters()) return true;
  }
  return false;
}

std::vector<CombinedTensor> NpuFusedOptimizer::modelGradBuffers() const {
  std::vector<CombinedTensor> out;
  for (const auto& bank : banks_) out.push_back(bank.grads);
  return out;
}

std::vector<CombinedTensor> NpuFusedOptimizer::steppedGradBuffers() const {
  std::vector<CombinedTensor> out;
  for (const auto& bank : banks_) out.push_back(bank.steppedGrads());
  return out;
}

const CombinedTensor& NpuFusedOptimizer::stateSlot(ParamBank& bank, const std::string& name, double init,
                                                   bool* created) {
  auto it = bank.state.find(name);
  const bool missing = it == bank.state.end();
  if (missing) {
    const CombinedTensor& stepped = bank.stepped();
    it = bank.state.emplace(name, CombinedTensor::filled(stepped.layoutPtr(), stepped.flat().options(), init)).first;
  }
  if (created != nullptr) *created = missing;
  return it->second;
}

std::vector<std::pair<std::string, double>> NpuFusedOptimizer::groupOptionValues(size_t group) const {
  TORCH_CHECK(group < numGroups(), name(), ": param group ", group, " does not exist (", numGroups(), " groups)");
  return groupOptions(group);
}

void NpuFusedOptimizer::setGroupOptionValues(size_t group, const std::vector<std::pair<std::string, double>>& values) {
  const auto before = groupOptionValues(group);
  for (const auto& [key, value] : values) {
    bool known = false;
    for (const auto& kv : before) known = known || kv.first == key;
    if (known) continue;
    std::string names;
    for (const auto& kv : before) names += (names.empty() ? "" : ", ") + kv.first;
    TORCH_CHECK(false, name(), ": param group ", group, " has no option '", key, "' (expected one of ", names, ")");
  }
  for (const auto& [key, value] : values) setGroupOption(group, key, value);
  try {
    validateGroup(group);
  } catch (...) {
    for (const auto& [key, value] : before) setGroupOption(group, key, value);
    throw;
  }
}

StateDict NpuFusedOptimizer::stateDict() const {
  StateDict dict;
  dict["step"] = at::scalar_tensor(step_, at::TensorOptions().dtype(at::kLong));
  for (size_t g = 0; g < numGroups(); ++g) {
    for (const auto& [key, value] : groupOptions(g)) {
      dict["group." + std::to_string(g) + "." + key] = at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble));
    }
  }
  at::NoGradGuard noGrad;
  for (const auto& bank : banks_) {
    for (size_t i = 0; i < bank.paramIndices.size(); ++i) {
      for (const auto& [slot, buffer] : bank.state) dict[paramKey(bank.paramIndices[i], slot)] = buffer.view(i).clone();
      if (bank.hasMasters()) dict[paramKey(bank.paramIndices[i], "master")] = bank.masters.view(i).clone();
    }
  }
  return dict;
}

void NpuFusedOptimizer::loadStateDict(const StateDict& dict) {
  const auto stepIt = dict.find("step");
  TORCH_CHECK(stepIt != dict.end() && stepIt->second.numel() == 1, name(), ": state dict has no \"step\"");

  // Validate everything before changing anything.
  std::vector<std::pair<std::string, double>> options;
  std::vector<size_t> optionGroup;
  for (size_t g = 0; g < numGroups(); ++g) {
    for (const auto& [key, unused] : groupOptions(g)) {
      const auto it = dict.find("group." + std::to_string(g) + "." + key);
      TORCH_CHECK(it != dict.end() && it->second.numel() == 1, name(), ": state dict lacks group.", g, ".", key,
                  " (saved by another optimizer or another grouping?)");
      options.emplace_back(key, it->second.item<double>());
      optionGroup.push_back(g);
    }
  }
  std::map<std::string, std::vector<const at::Tensor*>> slots;  // slot -> tensor per param index
  for (const auto& [key, tensor] : dict) {
    if (key.compare(0, 6, "group.") == 0) {
      const size_t g = std::stoul(key.substr(6));
      TORCH_CHECK(g < numGroups(), name(), ": state dict has group ", g, ", this optimizer has ", numGroups());
      continue;
    }
    size_t index = 0;
    std::string slot;
    if (!parseParamKey(key, &index, &slot)) continue;
    TORCH_CHECK(index < params_.size(), name(), ": state dict has parameter ", index, ", this optimizer has ",
                params_.size());
    TORCH_CHECK(tensor.sizes() == params_[index].sizes(), name(), ": ", key, " has shape ", tensor.sizes(),
                ", the parameter has ", params_[index].sizes());
    auto& list = slots[slot];
    list.resize(params_.size(), nullptr);
    list[index] = &tensor;
  }
  for (const auto& [slot, list] : slots) {
    if (slot == "master") continue;
    for (size_t i = 0; i < params_.size(); ++i) {
      TORCH_CHECK(list[i] != nullptr, name(), ": state dict has ", slot, " for some parameters but not parameter ", i);
    }
  }

  step_ = stepIt->second.item<int64_t>();
  for (size_t k = 0; k < options.size(); ++k) setGroupOption(optionGroup[k], options[k].first, options[k].second);
  at::NoGradGuard noGrad;
  for (auto& bank : banks_) {
    std::map<std::string, CombinedTensor> state;
    const CombinedTensor& stepped = bank.stepped();
    for (const auto& [slot, list] : slots) {
      if (slot == "master") continue;
      CombinedTensor buffer = CombinedTensor::filled(stepped.layoutPtr(), stepped.flat().options());
      for (size_t i = 0; i < bank.paramIndices.size(); ++i) buffer.view(i).copy_(*list[bank.paramIndices[i]]);
      state.emplace(slot, std::move(buffer));
    }
    bank.state = std::move(state);
    const auto masterIt = slots.find("master");
    if (bank.hasMasters() && masterIt != slots.end()) {
      for (size_t i = 0; i < bank.paramIndices.size(); ++i) {
        const at::Tensor* src = masterIt->second[bank.paramIndices[i]];
        if (src != nullptr) bank.masters.view(i).copy_(*src);
      }
    }
  }
  gradsStaged_ = false;
}

}  // namespace npuscope::optim
