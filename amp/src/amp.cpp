// The process's Amp state: initialize, scale_loss, step, state dicts, checkpoints, reporting.
#include "npuscope/amp/amp.h"

#include <exception>
#include <iostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include "model_cast.h"
#include "npuscope/device/npu.h"
#include "npuscope/optim/multi_tensor.h"
#include "npuscope/store/format.h"

namespace npuscope::amp {
namespace {

// Observers and the log sink outlive initialize()/reset().
struct Hooks {
  StepObserver step;
  OverflowObserver overflow;
  LogSink log;
  OverflowReducer reduce;
};
Hooks& hooks() {
  static Hooks h;
  return h;
}

struct State {
  bool initialized = false;
  Properties props;
  std::vector<LossScaler> scalers;
  std::shared_ptr<torch::nn::Module> model;
  std::shared_ptr<optim::NpuFusedOptimizer> optimizer;  // null for plain parameters
  std::vector<at::Tensor> params;                       // what amp unscales (model side)
  std::unordered_map<const c10::TensorImpl*, std::string> paramNames;
  // combine_grad for plain parameters: one flat gradient buffer per (dtype, device).
  std::vector<optim::CombinedTensor> plainGrads;
  std::vector<std::vector<size_t>> plainMembers;
  int statusDevice = -1;
  bool prevTracking = false;

  // This step so far.
  bool lossSeen = false;
  bool gradsUnscaled = false;  // an earlier scale_loss of this step left unscaled gradients
  bool overflow = false;
  bool skip = false;
  double scaleUsed = 1;
  std::string source, detail;
  int64_t steps = 0;

  // The current burst of skipped steps.
  int64_t burstFirst = -1;
  int64_t burstLen = 0;
  double burstScaleBefore = 0;
};
State& state() {
  static State s;
  return s;
}

void requireInit(const char* what) {
  TORCH_CHECK(state().initialized, "amp::", what, ": amp::initialize() has not been called");
}

void flushBurst(State& s) {
  if (s.burstLen == 0) return;
  if (s.props.verbosity >= 1) {
    std::ostringstream os;
    os << "skipped " << s.burstLen << " step" << (s.burstLen == 1 ? "" : "s") << " (step " << s.burstFirst;
    if (s.burstLen > 1) os << "-" << s.burstFirst + s.burstLen - 1;
    os << ") on gradient overflow; loss scale " << s.burstScaleBefore << " -> " << s.scalers.at(0).lossScale();
    detail::logLine(os.str());
  }
  s.burstLen = 0;
  s.burstFirst = -1;
}

int npuIndexOf(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {
    if (p.device().type() == npu::kDeviceType) return p.device().index();
  }
  return -1;
}

void tagOwnedMemory(const State& s);

// Common tail of every initialize(): scalers, float status, names, plain-parameter buffers.
void finishInit(State& s, Properties props, std::vector<at::Tensor> params) {
  if (props.overflow_check == OverflowCheck::kAuto) {
    props.overflow_check = npu::overflow_mode() == npu::OverflowMode::kSaturation ? OverflowCheck::kFloatStatus
                                                                                   : OverflowCheck::kNonFinite;
  }
  s.statusDevice = -1;
  if (props.enabled && props.overflow_check == OverflowCheck::kFloatStatus) {
    s.statusDevice = npuIndexOf(params);
    TORCH_CHECK(s.statusDevice >= 0,
                "amp::initialize: overflow_check float_status reads the npu float-status register, but no parameter is "
                "on an npu");
    s.prevTracking = npu::float_status_tracking();
    npu::set_float_status_tracking(true);
  }
  if (props.enabled && props.overflow_check == OverflowCheck::kNonFinite &&
      npu::overflow_mode() == npu::OverflowMode::kSaturation && props.verbosity >= 1) {
    detail::logLine(
        "warning: overflow_check non_finite in saturation mode: fp16 overflows saturate to +-65504 and only the "
        "float-status register sees them");
  }
  for (int i = 0; i < props.num_losses; ++i) {
    LossScalerOptions so = props.loss_scaler;
    if (!props.enabled) so = LossScalerOptions{false, 1.0};
    s.scalers.emplace_back(so);
    if (props.verbosity >= 1) s.scalers.back().setWarn([](const std::string& line) { detail::logLine("warning: " + line); });
  }
  s.params = std::move(params);
  if (s.model) {
    for (const auto& kv : s.model->named_parameters()) s.paramNames[kv.value().unsafeGetTensorImpl()] = kv.key();
  }
  s.props = props;
  s.initialized = true;
  tagOwnedMemory(s);
  if (props.verbosity >= 2) detail::logLine(props.describe());
}

// Tags the device memory amp and its optimizer own (runtime.h's memory categories): the
// model's parameters by name, gradients (combined or not), fp32 master weights and gradients,
// and the optimizer's state buffers. Cheap (a header write per buffer): done at initialize and
// after every step, when lazily created state appears.
void tagOwnedMemory(const State& s) {
  using C = npu::MemoryCategory;
  for (const at::Tensor& p : s.params) {
    auto it = s.paramNames.find(p.unsafeGetTensorImpl());
    npu::tag_tensor_memory(p, C::kParameter, it == s.paramNames.end() ? std::string() : it->second);
    if (p.grad().defined() && npu::memory_tag(p.grad().storage().data()) == C::kUntagged) {
      npu::tag_tensor_memory(p.grad(), C::kGradient, it == s.paramNames.end() ? std::string() : it->second + ".grad");
    }
  }
  for (const auto& g : s.plainGrads) npu::tag_tensor_memory(g.flat(), C::kGradient, "amp combined grads");
  if (!s.optimizer) return;
  const std::string name = s.optimizer->name();
  const auto& banks = s.optimizer->banks();
  for (size_t b = 0; b < banks.size(); ++b) {
    const optim::ParamBank& bank = banks[b];
    const std::string what = name + " bank " + std::to_string(b) + " ";
    npu::tag_tensor_memory(bank.params.flat(), C::kParameter, what + "params");
    npu::tag_tensor_memory(bank.grads.flat(), C::kGradient, what + "grads");
    if (bank.hasMasters()) {
      npu::tag_tensor_memory(bank.masters.flat(), C::kMasterWeight, what + "masters");
      npu::tag_tensor_memory(bank.masterGrads.flat(), C::kGradient, what + "master grads");
    }
    for (const auto& [slot, buffer] : bank.state) {
      if (npu::memory_tag(buffer.flat().storage().data()) == C::kUntagged) {
        npu::tag_tensor_memory(buffer.flat(), C::kOptimizerState, what + slot);
      }
    }
  }
}

void resetState() {
  State& s = state();
  if (s.initialized) {
    flushBurst(s);
    if (s.statusDevice >= 0) npu::set_float_status_tracking(s.prevTracking);
  }
  s = State();
}

Properties resolveOrThrow(const Options& options) {
  StatusOr<Properties> p = resolveOptions(options);
  TORCH_CHECK(p.isOk(), "amp::initialize: ", p.status().message());
  return p.value();
}

void checkOptimizerParams(const optim::NpuFusedOptimizer& opt, torch::nn::Module& model) {
  std::unordered_set<const c10::TensorImpl*> own;
  for (const auto& p : model.parameters()) own.insert(p.unsafeGetTensorImpl());
  for (size_t i = 0; i < opt.params().size(); ++i) {
    TORCH_CHECK(own.count(opt.params()[i].unsafeGetTensorImpl()) == 1, "amp::initialize: parameter ", i, " of ",
                opt.name(), " is not a parameter of the model");
  }
}

bool anyLowPrecision(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {
    if (p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16) return true;
  }
  return false;
}

void checkMasters(const optim::NpuFusedOptimizer& opt, const Properties& props) {
  if (!anyLowPrecision(opt.params())) return;
  TORCH_CHECK(opt.hasMasterWeights() == props.master_weights, "amp::initialize: master_weights is ",
              props.master_weights ? "on" : "off", " but the optimizer ", opt.name(), " was built ",
              opt.hasMasterWeights() ? "with" : "without", " them (FusedOptimizerConfig.masterWeights)");
}

// Prepares the model (cast) for `props`; returns whether its parameters were re-allocated.
bool prepareModel(torch::nn::Module& model, const Properties& props) {
  if (!props.enabled || !props.castsModel()) return false;
  const bool keepBn = props.lowPrecisionModel() && props.keep_batchnorm_fp32;
  if (!detail::needsCast(model, props.cast_model_type, keepBn)) return false;
  detail::castModel(model, props.cast_model_type, keepBn);
  return true;
}

// ---- unscale ---------------------------------------------------------------------------------

// The buffers a stash must cover and the ones backward writes.
std::vector<optim::CombinedTensor> steppedBuffers(const State& s) {
  return s.optimizer ? s.optimizer->steppedGradBuffers() : s.plainGrads;
}
std::vector<optim::CombinedTensor> modelBuffers(const State& s) {
  return s.optimizer ? s.optimizer->modelGradBuffers() : s.plainGrads;
}

// Re-points plain parameters' grads to their views of amp's buffers (something may have
// replaced them: set_to_none, an assignment); a replacement's values are kept.
void reattachPlainGrads(State& s) {
  at::NoGradGuard noGrad;
  for (size_t b = 0; b < s.plainGrads.size(); ++b) {
    const auto& buf = s.plainGrads[b];
    for (size_t i = 0; i < s.plainMembers[b].size(); ++i) {
      const at::Tensor& p = s.params[s.plainMembers[b][i]];
      const at::Tensor& g = p.grad();
      if (g.defined() && g.data_ptr() == buf.data(i)) continue;
      at::Tensor v = buf.view(i);
      if (g.defined()) {
        v.copy_(g);
      } else {
        v.zero_();
      }
      p.mutable_grad() = v;
    }
  }
}

struct Stash {
  std::vector<optim::CombinedTensor> combined;  // combine_grad
  std::vector<at::Tensor> perTensor;            // plain parameters without combine_grad
  bool defined() const { return !combined.empty() || !perTensor.empty(); }
};

Stash stashAndZero(State& s) {
  Stash st;
  at::NoGradGuard noGrad;
  if (s.optimizer || s.props.combine_grad) {
    if (!s.optimizer) reattachPlainGrads(s);
    for (const auto& b : steppedBuffers(s)) {
      auto copy = optim::CombinedTensor::filled(b.layoutPtr(), b.flat().options());
      copy.flat().copy_(b.flat());
      st.combined.push_back(copy);
    }
    for (const auto& b : modelBuffers(s)) b.zero();
  } else {
    for (const auto& p : s.params) {
      st.perTensor.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }
  return st;
}

// grads = grads * inv (+ stash); returns whether a non-finite value appeared.
bool unscale(State& s, double inv, const Stash& stash) {
  at::NoGradGuard noGrad;
  at::Tensor foundInf = at::zeros({1}, at::TensorOptions().dtype(at::kFloat));
  if (s.optimizer) {
    s.optimizer->unscaleGrads(inv, foundInf);
  } else if (s.props.combine_grad) {
    reattachPlainGrads(s);
    for (const auto& b : s.plainGrads) optim::scaleTensors(b, b, inv, foundInf);
  } else {
    bool bad = false;
    for (size_t i = 0; i < s.params.size(); ++i) {
      const at::Tensor& p = s.params[i];
      if (!p.grad().defined()) continue;
      at::Tensor g = p.mutable_grad();
      g.mul_(inv);
      if (stash.defined() && stash.perTensor[i].defined()) g.add_(stash.perTensor[i]);
      if (!at::isfinite(g).all().item<bool>()) bad = true;
    }
    return bad;
  }
  if (stash.defined()) {
    const auto stepped = steppedBuffers(s);
    for (size_t b = 0; b < stepped.size(); ++b) optim::axpby(1.0, stepped[b], 1.0, stash.combined[b], stepped[b], foundInf);
  }
  return optim::readFoundInf(foundInf);
}

// The first parameter whose (model) gradient is not finite, by name when known.
std::string firstNonFinite(const State& s) {
  at::NoGradGuard noGrad;
  const std::vector<at::Tensor> stepped = s.optimizer ? s.optimizer->steppedParams() : s.params;
  for (size_t i = 0; i < s.params.size(); ++i) {
    for (const at::Tensor* t : {&s.params[i], &stepped[i]}) {
      const at::Tensor& g = t->grad();
      if (g.defined() && !at::isfinite(g).all().item<bool>()) {
        const auto it = s.paramNames.find(s.params[i].unsafeGetTensorImpl());
        return it != s.paramNames.end() ? it->second : "param." + std::to_string(i);
      }
    }
  }
  return "";
}

// A fused optimizer amp may take over: it has not stepped, and it keeps combined gradients.
void checkFreshFused(const optim::NpuFusedOptimizer& opt, const Properties& props) {
  TORCH_CHECK(opt.stepCount() == 0, "amp::initialize: ", opt.name(), " has already taken ", opt.stepCount(),
              " step(s); initialize amp before the first optimizer step");
  TORCH_CHECK(props.combine_grad, "amp::initialize: combine_grad false: ", opt.name(),
              " keeps its gradients combined; the fused optimizers need combine_grad");
}

// Parameters the caller cast itself (plain parameters, front-ends that own the model): each has
// the level's model dtype, or fp32 where keep_batchnorm_fp32 keeps affine BatchNorms.
void checkCallerCast(const std::vector<at::Tensor>& params, const Properties& props) {
  if (!props.enabled || !props.castsModel()) return;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool keptFp32 = props.lowPrecisionModel() && props.keep_batchnorm_fp32 && params[i].scalar_type() == at::kFloat;
    TORCH_CHECK(params[i].scalar_type() == props.cast_model_type || keptFp32, "amp::initialize: parameter ", i,
                " is ", params[i].scalar_type(), "; opt_level ", optLevelName(props.opt_level),
                " expects it cast to ", c10::toString(props.cast_model_type), " first");
  }
}

void nameParams(State& s, const NamedParams& names) {
  for (const auto& [name, t] : names) s.paramNames[t.unsafeGetTensorImpl()] = name;
}

}  // namespace

const char* componentName() { return "amp"; }

// ---- initialize --------------------------------------------------------------------------------

Initialized initialize(std::shared_ptr<torch::nn::Module> model, std::shared_ptr<optim::NpuFusedOptimizer> optimizer,
                       const Options& options) {
  TORCH_CHECK(model != nullptr, "amp::initialize: model is null");
  TORCH_CHECK(optimizer != nullptr, "amp::initialize: optimizer is null (pass an OptimizerFactory to have one built)");
  const Properties props = resolveOrThrow(options);
  checkOptimizerParams(*optimizer, *model);
  checkFreshFused(*optimizer, props);
  resetState();
  const bool recast = prepareModel(*model, props);
  const bool wantMasters = props.enabled && props.master_weights;
  if (recast || (anyLowPrecision(optimizer->params()) && optimizer->hasMasterWeights() != wantMasters)) {
    optim::FusedOptimizerConfig config;
    config.masterWeights = wantMasters;
    optimizer = detail::rebuildOptimizer(*optimizer, config);
  }
  if (props.enabled) checkMasters(*optimizer, props);
  State& s = state();
  s.model = model;
  s.optimizer = optimizer;
  finishInit(s, props, optimizer->params());
  return {model, optimizer, s.props};
}

Initialized initialize(std::shared_ptr<torch::nn::Module> model, const OptimizerFactory& makeOptimizer,
                       const Options& options) {
  TORCH_CHECK(model != nullptr, "amp::initialize: model is null");
  TORCH_CHECK(makeOptimizer != nullptr, "amp::initialize: the optimizer factory is empty");
  const Properties props = resolveOrThrow(options);
  TORCH_CHECK(props.combine_grad, "amp::initialize: combine_grad false: the fused optimizers keep their gradients "
                                  "combined and need combine_grad");
  resetState();
  prepareModel(*model, props);
  optim::FusedOptimizerConfig config;
  config.masterWeights = props.enabled && props.master_weights;
  std::shared_ptr<optim::NpuFusedOptimizer> optimizer = makeOptimizer(model->parameters(), config);
  TORCH_CHECK(optimizer != nullptr, "amp::initialize: the optimizer factory returned null");
  checkOptimizerParams(*optimizer, *model);
  if (props.enabled) checkMasters(*optimizer, props);
  State& s = state();
  s.model = model;
  s.optimizer = optimizer;
  finishInit(s, props, optimizer->params());
  return {model, optimizer, s.props};
}

Properties initialize(const std::vector<at::Tensor>& params, const Options& options) {
  Properties props = resolveOrThrow(options);
  // Off unless asked for: torch::optim's zero_grad() detaches gradients in place, which views of
  // a flat buffer refuse.
  props.combine_grad = options.combine_grad.value_or(false);
  TORCH_CHECK(!params.empty(), "amp::initialize: the parameter list is empty");
  TORCH_CHECK(!props.enabled || !props.master_weights, "amp::initialize: opt_level ", optLevelName(props.opt_level),
              " steps fp32 master weights; that needs a fused optimizer (NpuFused*), plain parameters support O0, "
              "O1, O3 and O2 with master_weights off");
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].defined() && at::isFloatingType(params[i].scalar_type()), "amp::initialize: parameter ", i,
                " is not a defined floating tensor");
  }
  checkCallerCast(params, props);
  resetState();
  State& s = state();
  if (props.combine_grad) {
    // Group by (dtype, device) in order of first appearance, as the fused optimizers do.
    std::vector<std::pair<at::ScalarType, at::Device>> keys;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::pair<at::ScalarType, at::Device> key{params[i].scalar_type(), params[i].device()};
      size_t b = 0;
      while (b < keys.size() && keys[b] != key) ++b;
      if (b == keys.size()) {
        keys.push_back(key);
        s.plainMembers.emplace_back();
      }
      s.plainMembers[b].push_back(i);
    }
    for (size_t b = 0; b < keys.size(); ++b) {
      std::vector<std::vector<int64_t>> shapes;
      std::vector<at::Tensor> members;
      for (size_t i : s.plainMembers[b]) {
        shapes.push_back(params[i].sizes().vec());
        members.push_back(params[i]);
      }
      auto layout = std::make_shared<const optim::CombinedLayout>(std::move(shapes));
      auto grads = optim::CombinedTensor::filled(layout, params[s.plainMembers[b][0]].options());
      optim::attachGrads(members, grads);
      s.plainGrads.push_back(grads);
    }
  }
  finishInit(s, props, params);
  return s.props;
}

Properties initialize(std::shared_ptr<optim::NpuFusedOptimizer> optimizer, const Options& options,
                      const NamedParams& names) {
  TORCH_CHECK(optimizer != nullptr, "amp::initialize: optimizer is null");
  const Properties props = resolveOrThrow(options);
  checkFreshFused(*optimizer, props);
  checkCallerCast(optimizer->params(), props);
  resetState();
  if (props.enabled) checkMasters(*optimizer, props);
  State& s = state();
  s.optimizer = optimizer;
  nameParams(s, names);
  finishInit(s, props, optimizer->params());
  return s.props;
}

void set_param_names(const NamedParams& names) {
  requireInit("set_param_names");
  nameParams(state(), names);
  tagOwnedMemory(state());
}

bool isInitialized() { return state().initialized; }

const Properties& properties() {
  requireInit("properties");
  return state().props;
}

void reset() { resetState(); }

// ---- forward -----------------------------------------------------------------------------------

at::Tensor castInput(const at::Tensor& input) {
  const State& s = state();
  if (!s.initialized || !s.props.enabled || !s.props.castsModel()) return input;
  if (!input.defined() || !at::isFloatingType(input.scalar_type()) || input.scalar_type() == s.props.cast_model_type) {
    return input;
  }
  return input.to(s.props.cast_model_type);
}

at::Tensor castOutput(const at::Tensor& output) {
  const State& s = state();
  if (!s.initialized || !s.props.enabled || !(s.props.castsModel() || s.props.patch_ops)) return output;
  if (!output.defined() || !at::isFloatingType(output.scalar_type()) ||
      output.scalar_type() == s.props.cast_model_outputs) {
    return output;
  }
  return output.to(s.props.cast_model_outputs);
}

ForwardScope::ForwardScope() {
  const State& s = state();
  if (s.initialized && s.props.enabled && s.props.patch_ops) {
    guard_ = std::make_unique<AutocastGuard>(true, s.props.low_precision);
  }
}

ForwardScope::~ForwardScope() = default;

at::Tensor forward(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input) {
  at::Tensor out;
  {
    ForwardScope scope;
    out = fn(castInput(input));
  }
  return castOutput(out);
}

// ---- scale_loss --------------------------------------------------------------------------------

namespace {
// The stash of the ScaledLoss in flight (scale_loss scopes do not nest).
Stash& currentStash() {
  static Stash stash;
  return stash;
}

// The checked loss scale of `lossId` for scale_loss() and scaled_loss_value().
double checkedScale(const at::Tensor& loss, int lossId) {
  const State& s = state();
  requireInit("scale_loss");
  TORCH_CHECK(lossId >= 0 && lossId < static_cast<int>(s.scalers.size()), "amp::scale_loss: loss_id ", lossId,
              ": expected 0..", s.scalers.size() - 1, " (num_losses is ", s.scalers.size(), ")");
  TORCH_CHECK(loss.defined() && loss.numel() == 1 && at::isFloatingType(loss.scalar_type()),
              "amp::scale_loss: the loss must be a floating tensor of one element");
  return s.scalers[lossId].lossScale();
}

at::Tensor scaledLoss(const at::Tensor& loss, double scale) {
  // A float tensor factor, not a double scalar: with float-status tracking on, the device's
  // fallback would promote a wrapped double scalar to a Double result.
  const at::Tensor lossF = loss.to(at::kFloat);
  return lossF * at::scalar_tensor(scale, lossF.options());
}
}  // namespace

ScaledLoss::ScaledLoss(const at::Tensor& loss, int lossId) : lossId_(lossId), uncaught_(std::uncaught_exceptions()) {
  scale_ = checkedScale(loss, lossId);
  State& s = state();
  currentStash() = s.gradsUnscaled ? stashAndZero(s) : Stash();
  if (s.statusDevice >= 0) npu::clear_float_status(s.statusDevice);
  if (!s.lossSeen) s.scaleUsed = scale_;
  s.lossSeen = true;
  scaled_ = scaledLoss(loss, scale_);
}

at::Tensor scaled_loss_value(const at::Tensor& loss, int loss_id) {
  return scaledLoss(loss, checkedScale(loss, loss_id));
}

void ScaledLoss::backward(bool retainGraph) {
  torch::autograd::backward({scaled_}, {}, retainGraph);
}

LossResult ScaledLoss::finish() {
  TORCH_CHECK(!finished_, "amp::ScaledLoss::finish: already finished");
  finished_ = true;
  State& s = state();
  LossResult r;
  r.loss_id = lossId_;
  r.loss_scale = scale_;
  Stash stash = std::move(currentStash());
  currentStash() = Stash();
  const bool nonFinite = unscale(s, 1.0 / scale_, stash);
  bool register_ = false;
  if (s.statusDevice >= 0) {
    // A real device's float-status read is a kernel, a stream synchronisation and a copy to the
    // host (Ascend apex); recorded as an op so the predicted timeline waits there.
    RECORD_FUNCTION("npu::get_float_status", std::vector<c10::IValue>());
    register_ = npu::get_float_status(s.statusDevice);
  }
  s.gradsUnscaled = true;
  r.overflow = nonFinite || register_;
  // A rank of a job skips the step when any rank overflowed (apex on Ascend all-reduces the
  // flag): every rank keeps the same loss scale and the same parameters.
  const bool peer = hooks().reduce && hooks().reduce(r.overflow) && !r.overflow;
  if (peer) r.overflow = true;
  if (r.overflow) {
    r.overflow_source = register_ ? "float_status" : nonFinite ? "non_finite" : "peer_rank";
    OverflowEvent e;
    e.source = r.overflow_source;
    e.op_name = firstNonFinite(s);
    e.loss_id = lossId_;
    e.loss_scale = scale_;
    std::ostringstream os;
    os << "loss " << lossId_ << " at scale " << scale_ << ": ";
    if (peer) {
      os << "another rank of the job overflowed (this rank's gradients are finite)";
    } else if (register_) {
      os << "float-status register of " << npu::device_name(s.statusDevice) << " set during backward";
    } else {
      os << "non-finite gradient";
    }
    if (!e.op_name.empty()) os << " (first non-finite gradient: " << e.op_name << ")";
    e.detail = os.str();
    if (!s.overflow) {
      s.source = e.source;
      s.detail = e.detail;
    }
    s.overflow = true;
    detail::notifyOverflow(e);
  }
  r.skip = s.scalers[lossId_].update(r.overflow, lossId_);
  s.skip = s.skip || r.skip;
  r.next_loss_scale = s.scalers[lossId_].lossScale();
  return r;
}

void ScaledLoss::abandon() {
  if (finished_) return;
  finished_ = true;
  Stash stash = std::move(currentStash());
  currentStash() = Stash();
  if (!stash.defined()) return;
  // Gradients an earlier scale_loss of this step left (stashed when this one began) come back;
  // what this failed backward accumulated is dropped, as if the block had not run.
  State& s = state();
  at::NoGradGuard noGrad;
  if (!stash.combined.empty()) {
    const auto stepped = steppedBuffers(s);
    const auto model = modelBuffers(s);  // bank by bank, like stepped
    for (size_t b = 0; b < stepped.size(); ++b) {
      stepped[b].flat().copy_(stash.combined[b].flat());
      if (model[b].flat().data_ptr() != stepped[b].flat().data_ptr()) model[b].zero();  // fp16 side of masters
    }
  } else {
    for (size_t i = 0; i < s.params.size(); ++i) {
      if (stash.perTensor[i].defined()) s.params[i].mutable_grad() = stash.perTensor[i];
    }
  }
}

ScaledLoss::~ScaledLoss() noexcept(false) {
  if (finished_ || std::uncaught_exceptions() > uncaught_) return;
  finish();
}

ScaledLoss scale_loss(const at::Tensor& loss, optim::NpuFusedOptimizer& optimizer, int loss_id) {
  requireInit("scale_loss");
  TORCH_CHECK(state().optimizer.get() == &optimizer, "amp::scale_loss: ", optimizer.name(),
              " is not the optimizer amp::initialize() returned");
  return ScaledLoss(loss, loss_id);
}

ScaledLoss scale_loss(const at::Tensor& loss, int loss_id) { return ScaledLoss(loss, loss_id); }

// ---- step --------------------------------------------------------------------------------------

namespace {

StepInfo endStep(State& s, const std::function<void()>& doStep) {
  StepInfo info;
  info.step = s.steps;
  info.loss_scale = s.lossSeen ? s.scaleUsed : s.scalers.at(0).lossScale();
  info.overflow = s.overflow;
  info.skipped = s.skip;
  info.overflow_source = s.source;
  info.detail = s.detail;
  if (!s.skip) doStep();
  tagOwnedMemory(s);
  info.next_loss_scale = s.scalers.at(0).lossScale();
  if (info.skipped) {
    if (s.burstLen == 0) {
      s.burstFirst = s.steps;
      s.burstScaleBefore = info.loss_scale;
    }
    ++s.burstLen;
    if (s.props.verbosity >= 2) {
      detail::logLine("step " + std::to_string(s.steps) + " skipped on gradient overflow (" + s.detail +
                      "); loss scale now " + formatGeneral(info.next_loss_scale));
    }
  } else {
    flushBurst(s);
  }
  ++s.steps;
  s.lossSeen = s.gradsUnscaled = s.overflow = s.skip = false;
  s.source.clear();
  s.detail.clear();
  detail::notifyStep(info);
  return info;
}

}  // namespace

StepInfo step(optim::NpuFusedOptimizer& optimizer) {
  requireInit("step");
  State& s = state();
  TORCH_CHECK(s.optimizer.get() == &optimizer, "amp::step: ", optimizer.name(),
              " is not the optimizer amp::initialize() returned");
  const bool skipping = s.skip;
  StepInfo info = endStep(s, [&] { optimizer.step(); });
  if (skipping) {
    // A no-op that also drops the optimizer's staged master gradients.
    optimizer.step(at::ones({1}, at::TensorOptions().dtype(at::kFloat)));
  }
  return info;
}

StepInfo step(const std::function<void()>& optimizerStep) {
  requireInit("step");
  State& s = state();
  TORCH_CHECK(s.optimizer == nullptr, "amp::step: amp was initialized with ", s.optimizer ? s.optimizer->name() : "",
              "; pass that optimizer");
  return endStep(s, [&] {
    if (optimizerStep) optimizerStep();
  });
}

double loss_scale(int loss_id) {
  requireInit("loss_scale");
  const State& s = state();
  TORCH_CHECK(loss_id >= 0 && loss_id < static_cast<int>(s.scalers.size()), "amp::loss_scale: loss_id ", loss_id,
              " out of range (num_losses is ", s.scalers.size(), ")");
  return s.scalers[loss_id].lossScale();
}

std::vector<optim::CombinedTensor> grad_buffers() {
  requireInit("grad_buffers");
  return modelBuffers(state());
}

// ---- state -------------------------------------------------------------------------------------

StateDict state_dict() {
  requireInit("state_dict");
  StateDict d;
  const State& s = state();
  for (size_t i = 0; i < s.scalers.size(); ++i) {
    const std::string k = "loss_scaler" + std::to_string(i);
    d[k + ".loss_scale"] = at::scalar_tensor(s.scalers[i].lossScale(), at::TensorOptions().dtype(at::kDouble));
    d[k + ".unskipped"] = at::scalar_tensor(s.scalers[i].unskipped(), at::TensorOptions().dtype(at::kLong));
  }
  return d;
}

void load_state_dict(const StateDict& dict) {
  requireInit("load_state_dict");
  State& s = state();
  std::vector<std::pair<double, int64_t>> values;
  for (size_t i = 0; i < s.scalers.size(); ++i) {
    const std::string k = "loss_scaler" + std::to_string(i);
    const auto a = dict.find(k + ".loss_scale");
    const auto b = dict.find(k + ".unskipped");
    TORCH_CHECK(a != dict.end() && b != dict.end() && a->second.numel() == 1 && b->second.numel() == 1,
                "amp::load_state_dict: the state has no ", k, ".loss_scale / ", k,
                ".unskipped (saved with fewer num_losses?)");
    values.emplace_back(a->second.item<double>(), b->second.item<int64_t>());
  }
  for (const auto& [key, unused] : dict) {
    if (key.rfind("loss_scaler", 0) != 0) continue;
    const size_t id = std::stoul(key.substr(11));
    TORCH_CHECK(id < s.scalers.size(), "amp::load_state_dict: the state has ", key, " but num_losses is ",
                s.scalers.size());
  }
  for (size_t i = 0; i < values.size(); ++i) s.scalers[i].set(values[i].first, values[i].second);
}

void save_checkpoint(const std::string& path, torch::nn::Module& model, const optim::NpuFusedOptimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  at::NoGradGuard noGrad;
  for (const auto& kv : model.named_parameters()) archive.write("model." + kv.key(), kv.value().cpu());
  for (const auto& kv : model.named_buffers()) archive.write("model." + kv.key(), kv.value().cpu(), /*is_buffer=*/true);
  for (const auto& [k, v] : optimizer.stateDict()) archive.write("optimizer." + k, v.cpu());
  for (const auto& [k, v] : state_dict()) archive.write("amp." + k, v);
  archive.save_to(path);
}

void load_checkpoint(const std::string& path, torch::nn::Module& model, optim::NpuFusedOptimizer& optimizer) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  at::NoGradGuard noGrad;
  auto readInto = [&](const std::string& key, at::Tensor& dst) {
    at::Tensor v;
    TORCH_CHECK(archive.try_read(key, v), "amp::load_checkpoint: ", path, " has no ", key);
    TORCH_CHECK(v.sizes() == dst.sizes(), "amp::load_checkpoint: ", key, " has shape ", v.sizes(), ", the model has ",
                dst.sizes());
    dst.copy_(v);
  };
  for (auto& kv : model.named_parameters()) readInto("model." + kv.key(), kv.value());
  for (auto& kv : model.named_buffers()) readInto("model." + kv.key(), kv.value());
  optim::StateDict od;
  for (const std::string& k : archive.keys()) {
    at::Tensor v;
    if (k.rfind("optimizer.", 0) == 0 && archive.try_read(k, v)) od[k.substr(10)] = v;
  }
  optimizer.loadStateDict(od);
  optimizer.refreshModelParams();
  StateDict ad;
  for (const std::string& k : archive.keys()) {
    at::Tensor v;
    if (k.rfind("amp.", 0) == 0 && archive.try_read(k, v)) ad[k.substr(4)] = v;
  }
  load_state_dict(ad);
}

// ---- reporting ---------------------------------------------------------------------------------

void setStepObserver(StepObserver observer) { hooks().step = std::move(observer); }
void setOverflowObserver(OverflowObserver observer) { hooks().overflow = std::move(observer); }
void setLogSink(LogSink sink) { hooks().log = std::move(sink); }
void setOverflowReducer(OverflowReducer reducer) { hooks().reduce = std::move(reducer); }

namespace detail {
void notifyStep(const StepInfo& info) {
  if (hooks().step) hooks().step(info);
}
void notifyOverflow(const OverflowEvent& event) {
  if (hooks().overflow) hooks().overflow(event);
}
void logLine(const std::string& line) {
  if (hooks().log) {
    hooks().log(line);
  } else {
    std::cerr << "npuscope amp: " << line << std::endl;
  }
}
}  // namespace detail

}  // namespace npuscope::amp
