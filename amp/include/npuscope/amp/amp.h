// npuscope_amp: apex-style Amp on the npu device (apex/amp, Ascend apex; references.md).
//
//   auto amped = amp::initialize(model, optimizer, {.opt_level = amp::OptLevel::kO2});
//   for (...) {
//     at::Tensor out = amp::forward([&](const at::Tensor& x) { return model->forward(x); }, input);
//     at::Tensor loss = cross_entropy(out, target);                 // fp32 under every level
//     amped.optimizer->zeroGrad();
//     {
//       auto scaled = amp::scale_loss(loss, *amped.optimizer);       // loss * scale
//       scaled.backward();
//     }                                 // exit: unscale + overflow check + loss-scale update
//     amp::StepInfo s = amp::step(*amped.optimizer);                 // skipped on overflow
//   }
//
// Like apex's _amp_state, the Amp state is one per process (initialize() replaces it) and is
// not thread-safe: one training loop drives it. Errors are c10::Error exceptions with one line
// naming the option or object and what was expected (as in npuscope_optim).
//
// Opt levels (any explicit option overrides the preset; contradictions are refused):
//   level  cast_model_type  patch_ops  keep_batchnorm_fp32  master_weights  loss_scale
//   O0     fp32             no         -                    no              1.0
//   O1     none             yes        -                    -               dynamic
//   O2     fp16             no         yes                  yes             dynamic
//   O3     fp16             no         no                   no              1.0
// "fp16" is the low-precision dtype: float16 by default, bfloat16 with low_precision = kBFloat16
// (or an explicit cast_model_type of bfloat16).
//
// Loss scaling follows loss_scaler.h. A dynamic scaler skips a step that overflowed: the
// optimizer is not called, so parameters and optimizer state stay bit-identical. A static
// scaler reports the overflow and steps anyway (apex). Overflow detection:
//   kFloatStatus  the device's float-status register, cleared when scale_loss() is entered
//                 (before backward) and read at its exit; the only way to see an fp16 overflow
//                 in saturation mode, where results clamp to +-65504. Turns float-status
//                 tracking on. The unscale pass's non-finite check is OR-ed in for free.
//   kNonFinite    the unscale pass itself: a non-finite gradient after unscaling.
//   kAuto         kFloatStatus when the device is in saturation mode at initialize(), else
//                 kNonFinite.
// combine_grad: gradients live in one flat buffer per (dtype, device) (optim's combined tensors:
// each tensor occupies ceil(n/16)*16 + 32 elements) and the unscale + overflow check is one pass
// over it that never reads the padding. The fused optimizers always combine, so combine_grad is
// on by default with them and cannot be turned off. For plain parameters it is off by default
// (torch::optim's zero_grad() detaches gradients in place, which views of a flat buffer
// refuse; zero them with Module::zero_grad() or amp's buffers instead) and may be turned on.
//
// Reporting to a recording session (npuscope_profiler links amp, so amp cannot call it): set
// observers; the training loop forwards them, e.g.
//   amp::setOverflowObserver([&](const amp::OverflowEvent& e) {
//     if (auto* s = profiler::RecordingSession::active()) s->overflow(e.source, e.op_name, e.detail);
//   });
//   StepInfo info = amp::step(*optimizer);   // or the step observer
//   session->step({loss, info.loss_scale, info.overflow, info.skipped, lr, grad_norm});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "npuscope/amp/autocast.h"
#include "npuscope/amp/grad_scaler.h"
#include "npuscope/amp/loss_scaler.h"
#include "npuscope/store/status.h"
#include "npuscope/optim/combined_tensor.h"
#include "npuscope/optim/fused_optimizer.h"

namespace torch::nn {
class Module;
}

namespace npuscope::amp {

const char* componentName();

enum class OptLevel { kO0, kO1, kO2, kO3 };
const char* optLevelName(OptLevel level);  // "O0"
StatusOr<OptLevel> parseOptLevel(const std::string& text);

enum class OverflowCheck { kAuto, kFloatStatus, kNonFinite };
const char* overflowCheckName(OverflowCheck check);  // "auto", "float_status", "non_finite"
StatusOr<OverflowCheck> parseOverflowCheck(const std::string& text);

// apex's loss_scale: a number or "dynamic".
struct LossScale {
  bool dynamic = true;
  double value = 1.0;  // when !dynamic
  static LossScale Dynamic() { return {true, 1.0}; }
  static LossScale Fixed(double v) { return {false, v}; }
};
StatusOr<LossScale> parseLossScale(const std::string& text);  // "dynamic" or a positive number

// cast_model_type's "None" of apex (O1: leave the model's dtypes alone).
constexpr at::ScalarType kNoCast = at::ScalarType::Undefined;
// "none", "fp32"/"float32", "fp16"/"float16"/"half", "bf16"/"bfloat16".
StatusOr<at::ScalarType> parseCastType(const std::string& text);

// Everything amp.initialize() takes. Unset optionals take the opt level's preset.
struct Options {
  OptLevel opt_level = OptLevel::kO1;
  std::optional<at::ScalarType> cast_model_type;  // kNoCast, kFloat, kHalf, kBFloat16
  std::optional<bool> patch_ops;                  // O1 casting (apex patch_torch_functions)
  std::optional<bool> keep_batchnorm_fp32;        // only with a low-precision model
  std::optional<bool> master_weights;             // only with a low-precision model
  std::optional<LossScale> loss_scale;
  std::optional<double> dynamic_init_scale;       // dynamic only; default 2^16
  std::optional<double> scale_growth_factor;      // dynamic only; default 2
  std::optional<double> scale_backoff_factor;     // dynamic only; default 0.5
  std::optional<int64_t> scale_window;            // dynamic only; default 2000
  std::optional<double> min_loss_scale;           // dynamic only; default none
  std::optional<double> max_loss_scale;           // dynamic only; default 2^24
  int num_losses = 1;
  std::optional<bool> combine_grad;               // default on (plain parameters: off)
  int verbosity = 1;  // 0 silent; 1 burst summaries and warnings; 2 also a line per skipped step
  std::optional<at::ScalarType> low_precision;    // kHalf (default) or kBFloat16
  OverflowCheck overflow_check = OverflowCheck::kAuto;
  std::optional<at::ScalarType> cast_model_outputs;  // O2/O3 forward output dtype; default fp32
  bool enabled = true;  // false: initialize() changes nothing and scale_loss() scales by 1
};

// Options after presets and overrides: what initialize() applies.
struct Properties {
  bool enabled = true;
  OptLevel opt_level = OptLevel::kO1;
  at::ScalarType cast_model_type = kNoCast;
  bool patch_ops = false;
  bool keep_batchnorm_fp32 = false;
  bool master_weights = false;
  LossScalerOptions loss_scaler;
  int num_losses = 1;
  bool combine_grad = true;
  int verbosity = 1;
  at::ScalarType low_precision = at::kHalf;
  OverflowCheck overflow_check = OverflowCheck::kAuto;  // resolved by initialize()
  at::ScalarType cast_model_outputs = at::kFloat;

  bool castsModel() const { return cast_model_type != kNoCast; }
  bool lowPrecisionModel() const { return cast_model_type == at::kHalf || cast_model_type == at::kBFloat16; }
  // apex's start-up table, one "name : value" line per property.
  std::string describe() const;
};

// Applies presets and overrides; an error names the contradicting or invalid options.
StatusOr<Properties> resolveOptions(const Options& options);

// Builds the fused optimizer over the model's (already cast) parameters with `config`
// (master weights) — for initialize() when the caller has no optimizer yet.
using OptimizerFactory = std::function<std::shared_ptr<optim::NpuFusedOptimizer>(
    const std::vector<at::Tensor>& params, const optim::FusedOptimizerConfig& config)>;

struct Initialized {
  std::shared_ptr<torch::nn::Module> model;
  // Use this optimizer from now on: when the model had to be cast (O0 of a low-precision
  // model, O2, O3) or master weights added, it is a new optimizer of the same type and
  // hyper-parameters over the cast parameters, and the one passed in is stale (its step()
  // refuses, naming the moved parameter).
  std::shared_ptr<optim::NpuFusedOptimizer> optimizer;
  Properties properties;
};

// Casts the model as the level says (O2: fp16 except affine BatchNorm when
// keep_batchnorm_fp32; parameters keep their identity), sets up master weights and loss
// scalers, and makes this the process's Amp state. The optimizer must be built over the
// model's parameters and must not have stepped yet.
Initialized initialize(std::shared_ptr<torch::nn::Module> model, std::shared_ptr<optim::NpuFusedOptimizer> optimizer,
                       const Options& options = {});
Initialized initialize(std::shared_ptr<torch::nn::Module> model, const OptimizerFactory& makeOptimizer,
                       const Options& options = {});
// Plain parameters stepped by an optimizer of the caller's (torch::optim, hand-written, or
// Python's torch.optim): no master weights. A level that casts the model (O0 of low-precision
// parameters, O3, O2 without master weights) needs the parameters already cast by the caller;
// step(fn) then decides whether fn runs.
Properties initialize(const std::vector<at::Tensor>& params, const Options& options = {});

// For front-ends that own the model themselves (Python's nn.Module): the caller has cast the
// model as resolveOptions(options) says and built `optimizer` over its parameters, with master
// weights exactly when the resolved properties have them (checked). `names` name the
// parameters in overflow events ("layer1.weight"); parameters without a name are "param.<i>".
using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;
Properties initialize(std::shared_ptr<optim::NpuFusedOptimizer> optimizer, const Options& options,
                      const NamedParams& names = {});
// Names plain parameters (initialize(params, ...)) in overflow events.
void set_param_names(const NamedParams& names);

bool isInitialized();
const Properties& properties();
// Forgets the Amp state (flushing a pending skip summary) and restores float-status tracking.
void reset();

// ---- forward ---------------------------------------------------------------------------------
// castInput: O0/O2/O3 (a cast_model_type): floating inputs to cast_model_type.
// castOutput: floating outputs to cast_model_outputs (fp32 by default) when the model is cast or
// O1 casting is on; so the loss is computed in fp32 at every level, as apex's patched forward
// (O2/O3) and its fp32-listed loss functions (O1) make it. Identity otherwise.
at::Tensor castInput(const at::Tensor& input);
at::Tensor castOutput(const at::Tensor& output);
// O1 casting for the current thread while alive (nothing when patch_ops is off).
class ForwardScope {
 public:
  ForwardScope();
  ~ForwardScope();
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

 private:
  std::unique_ptr<AutocastGuard> guard_;
};
// castOutput(fn(castInput(input))) inside a ForwardScope: apex's patched forward.
at::Tensor forward(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input);

// ---- loss scaling ----------------------------------------------------------------------------
struct LossResult {
  int loss_id = 0;
  double loss_scale = 1;       // the scale this backward used
  double next_loss_scale = 1;  // after the update
  bool overflow = false;
  bool skip = false;           // the step will be skipped
  std::string overflow_source; // "float_status" or "non_finite" when overflow
};

// The scope of one scaled backward (apex's `with amp.scale_loss(...) as scaled_loss`). On
// construction the float-status register is cleared (kFloatStatus) and, when an earlier loss of
// this step already left unscaled gradients, they are stashed and the model's gradients zeroed;
// finish() (or the destructor) unscales the new gradients (adding the stash back), checks for
// overflow and updates this loss's scaler. The destructor does nothing while an exception
// unwinds.
class ScaledLoss {
 public:
  ~ScaledLoss() noexcept(false);
  ScaledLoss(const ScaledLoss&) = delete;
  ScaledLoss& operator=(const ScaledLoss&) = delete;

  // loss.float() * loss_scale.
  const at::Tensor& get() const { return scaled_; }
  void backward(bool retainGraph = false);
  LossResult finish();
  // Ends the scope without unscaling or updating the scaler (the caller's backward failed):
  // the gradients are as they were before this scope (what an earlier scale_loss of the step
  // left comes back; what this one accumulated is dropped). Front-ends whose scopes end outside
  // C++ unwinding (Python's `with`) call it on an exception.
  void abandon();

 private:
  friend ScaledLoss scale_loss(const at::Tensor&, optim::NpuFusedOptimizer&, int);
  friend ScaledLoss scale_loss(const at::Tensor&, int);
  ScaledLoss(const at::Tensor& loss, int lossId);

  at::Tensor scaled_;
  int lossId_;
  double scale_;
  bool finished_ = false;
  int uncaught_;
};

ScaledLoss scale_loss(const at::Tensor& loss, optim::NpuFusedOptimizer& optimizer, int loss_id = 0);
// For plain parameters (or the initialized optimizer).
ScaledLoss scale_loss(const at::Tensor& loss, int loss_id = 0);
// The tensor scale_loss(loss, loss_id).get() would be, computed by the same ops, without
// starting a scaled backward: no stash, no float-status clear, no scaler update — nothing of
// amp's step changes. For dry runs such as the dumper's sizing pass.
at::Tensor scaled_loss_value(const at::Tensor& loss, int loss_id = 0);

struct StepInfo {
  int64_t step = 0;            // amp steps before this one
  double loss_scale = 1;       // the scale the step's backward used (loss 0's first backward)
  double next_loss_scale = 1;  // loss 0's scale after the update
  bool overflow = false;
  bool skipped = false;
  std::string overflow_source;  // "float_status" / "non_finite" when overflow
  std::string detail;           // a line about the overflow when overflow
};

// Ends the step: steps the optimizer unless a dynamic scaler found an overflow since the last
// step, reports to the step observer and to the skip summary.
StepInfo step(optim::NpuFusedOptimizer& optimizer);
// Plain parameters: calls optimizerStep unless the step is skipped.
StepInfo step(const std::function<void()>& optimizerStep);

double loss_scale(int loss_id = 0);
// The combined gradient buffers amp unscales (the optimizer's model gradients, or amp's own
// for plain parameters with combine_grad); empty without combine_grad.
std::vector<optim::CombinedTensor> grad_buffers();

// ---- checkpoints -----------------------------------------------------------------------------
// apex's amp.state_dict(): per loss scaler "loss_scaler<i>.loss_scale" (float64 scalar) and
// "loss_scaler<i>.unskipped" (int64 scalar). load_state_dict() checks every key before
// changing anything.
using StateDict = optim::StateDict;
StateDict state_dict();
void load_state_dict(const StateDict& dict);

// Model parameters and buffers, the optimizer's state and the Amp state in one torch archive;
// resuming from it reproduces the uninterrupted run bit for bit.
void save_checkpoint(const std::string& path, torch::nn::Module& model, const optim::NpuFusedOptimizer& optimizer);
void load_checkpoint(const std::string& path, torch::nn::Module& model, optim::NpuFusedOptimizer& optimizer);

// ---- reporting -------------------------------------------------------------------------------
struct OverflowEvent {
  std::string source;   // "float_status", "non_finite" or "peer_rank" (another rank overflowed)
  std::string op_name;  // the first non-finite gradient's parameter, when known
  std::string detail;
  int loss_id = 0;
  double loss_scale = 1;
};
using StepObserver = std::function<void(const StepInfo&)>;
using OverflowObserver = std::function<void(const OverflowEvent&)>;
using LogSink = std::function<void(const std::string& line)>;
// Called at the end of every step() (and GradScaler::update()); empty to remove. Kept across
// initialize() and reset().
void setStepObserver(StepObserver observer);
// Called when scale_loss() (or GradScaler) finds an overflow.
void setOverflowObserver(OverflowObserver observer);
// Where amp's lines go (default: stderr, prefixed "npuscope amp: "); empty restores the default.
void setLogSink(LogSink sink);
// Multi-rank jobs: given this rank's overflow decision, returns the job's (true when any rank
// overflowed: an all-reduce of the flag), so every rank skips the same steps and keeps the same
// loss scale. A rank that skips only for a peer reports source "peer_rank". Empty: one rank.
using OverflowReducer = std::function<bool(bool local_overflow)>;
void setOverflowReducer(OverflowReducer reducer);

namespace detail {
void notifyStep(const StepInfo& info);
void notifyOverflow(const OverflowEvent& event);
void logLine(const std::string& line);
}  // namespace detail

}  // namespace npuscope::amp
