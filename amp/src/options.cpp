// Opt-level presets, overrides and the refusal of contradictions (apex's Properties).
#include <cmath>
#include <sstream>

#include "npuscope/amp/amp.h"
#include "npuscope/store/format.h"

namespace npuscope::amp {
namespace {

std::string dtypeName(at::ScalarType t) {
  switch (t) {
    case at::ScalarType::Undefined: return "none";
    case at::kFloat: return "fp32";
    case at::kHalf: return "fp16";
    case at::kBFloat16: return "bf16";
    default: return c10::toString(t);
  }
}

bool isLow(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

}  // namespace

const char* optLevelName(OptLevel level) {
  switch (level) {
    case OptLevel::kO0: return "O0";
    case OptLevel::kO1: return "O1";
    case OptLevel::kO2: return "O2";
    case OptLevel::kO3: return "O3";
  }
  return "?";
}

StatusOr<OptLevel> parseOptLevel(const std::string& text) {
  if (text == "O0") return OptLevel::kO0;
  if (text == "O1") return OptLevel::kO1;
  if (text == "O2") return OptLevel::kO2;
  if (text == "O3") return OptLevel::kO3;
  return invalidArgument("opt_level '" + text + "': expected O0, O1, O2 or O3 (capital O)");
}

const char* overflowCheckName(OverflowCheck check) {
  switch (check) {
    case OverflowCheck::kAuto: return "auto";
    case OverflowCheck::kFloatStatus: return "float_status";
    case OverflowCheck::kNonFinite: return "non_finite";
  }
  return "?";
}

StatusOr<OverflowCheck> parseOverflowCheck(const std::string& text) {
  if (text == "auto") return OverflowCheck::kAuto;
  if (text == "float_status" || text == "float-status") return OverflowCheck::kFloatStatus;
  if (text == "non_finite" || text == "non-finite") return OverflowCheck::kNonFinite;
  return invalidArgument("overflow check '" + text + "': expected auto, float_status or non_finite");
}

StatusOr<LossScale> parseLossScale(const std::string& text) {
  if (text == "dynamic") return LossScale::Dynamic();
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v > 0) return LossScale::Fixed(v);
  } catch (const std::exception&) {
  }
  return invalidArgument("loss_scale '" + text + "': expected dynamic or a positive number");
}

StatusOr<at::ScalarType> parseCastType(const std::string& text) {
  if (text == "none") return kNoCast;
  if (text == "fp32" || text == "float32" || text == "float") return at::kFloat;
  if (text == "fp16" || text == "float16" || text == "half") return at::kHalf;
  if (text == "bf16" || text == "bfloat16") return at::kBFloat16;
  return invalidArgument("dtype '" + text + "': expected none, fp32, fp16 or bf16");
}

StatusOr<Properties> resolveOptions(const Options& o) {
  Properties p;
  p.enabled = o.enabled;
  p.opt_level = o.opt_level;
  p.verbosity = o.verbosity;
  if (o.verbosity < 0) return invalidArgument("verbosity " + std::to_string(o.verbosity) + ": expected 0, 1 or 2");
  if (o.num_losses < 1) return invalidArgument("num_losses " + std::to_string(o.num_losses) + ": expected at least 1");
  p.num_losses = o.num_losses;

  if (o.low_precision && !isLow(*o.low_precision)) {
    return invalidArgument("low_precision " + dtypeName(*o.low_precision) + ": expected fp16 or bf16");
  }
  if (o.cast_model_type && *o.cast_model_type != kNoCast && *o.cast_model_type != at::kFloat &&
      !isLow(*o.cast_model_type)) {
    return invalidArgument("cast_model_type " + dtypeName(*o.cast_model_type) + ": expected none, fp32, fp16 or bf16");
  }
  if (o.cast_model_type && isLow(*o.cast_model_type) && o.low_precision && *o.cast_model_type != *o.low_precision) {
    return invalidArgument("cast_model_type " + dtypeName(*o.cast_model_type) + " contradicts low_precision " +
                           dtypeName(*o.low_precision) + ": give one of them, or the same dtype");
  }
  p.low_precision = o.low_precision ? *o.low_precision
                    : (o.cast_model_type && isLow(*o.cast_model_type)) ? *o.cast_model_type
                                                                        : at::kHalf;

  // Presets (references.md table).
  bool dynamic = true;
  double staticScale = 1.0;
  switch (o.opt_level) {
    case OptLevel::kO0:
      p.cast_model_type = at::kFloat, p.patch_ops = false, p.keep_batchnorm_fp32 = false, p.master_weights = false;
      dynamic = false;
      break;
    case OptLevel::kO1:
      p.cast_model_type = kNoCast, p.patch_ops = true, p.keep_batchnorm_fp32 = false, p.master_weights = false;
      break;
    case OptLevel::kO2:
      p.cast_model_type = p.low_precision, p.patch_ops = false, p.keep_batchnorm_fp32 = true, p.master_weights = true;
      break;
    case OptLevel::kO3:
      p.cast_model_type = p.low_precision, p.patch_ops = false, p.keep_batchnorm_fp32 = false, p.master_weights = false;
      dynamic = false;
      break;
  }

  // Overrides, then the contradictions among them.
  if (o.cast_model_type) p.cast_model_type = *o.cast_model_type;
  if (o.patch_ops) p.patch_ops = *o.patch_ops;
  const bool lowModel = isLow(p.cast_model_type);
  if (p.patch_ops && lowModel) {
    return invalidArgument(std::string("patch_ops (O1 casting) with cast_model_type ") + dtypeName(p.cast_model_type) +
                           ": O1 casts the ops of an fp32 model; a " + dtypeName(p.cast_model_type) +
                           " model is O2/O3 (set cast_model_type none, or patch_ops false)");
  }
  if (o.keep_batchnorm_fp32) {
    if (!lowModel) {
      return invalidArgument(std::string("keep_batchnorm_fp32 with opt_level ") + optLevelName(o.opt_level) +
                             " and cast_model_type " + dtypeName(p.cast_model_type) +
                             ": it applies only to a model cast to fp16/bf16 (O2/O3); leave it unset");
    }
    p.keep_batchnorm_fp32 = *o.keep_batchnorm_fp32;
  }
  if (!lowModel) p.keep_batchnorm_fp32 = false;
  if (o.master_weights) {
    if (*o.master_weights && !lowModel) {
      return invalidArgument(std::string("master_weights with opt_level ") + optLevelName(o.opt_level) +
                             " and cast_model_type " + dtypeName(p.cast_model_type) +
                             ": the model's weights are fp32 already; master weights need an fp16/bf16 model (O2/O3)");
    }
    p.master_weights = *o.master_weights;
  }

  if (o.loss_scale) {
    dynamic = o.loss_scale->dynamic;
    staticScale = o.loss_scale->value;
  }
  if (!dynamic) {
    const std::pair<const char*, bool> knobs[] = {
        {"dynamic_init_scale", o.dynamic_init_scale.has_value()},
        {"scale_growth_factor", o.scale_growth_factor.has_value()},
        {"scale_backoff_factor", o.scale_backoff_factor.has_value()},
        {"scale_window", o.scale_window.has_value()},
        {"min_loss_scale", o.min_loss_scale.has_value()},
        {"max_loss_scale", o.max_loss_scale.has_value()},
    };
    for (const auto& [name, set] : knobs) {
      if (set) {
        return invalidArgument(std::string(name) + " applies to loss_scale dynamic, but loss_scale is the fixed " +
                               formatGeneral(staticScale) + (o.loss_scale ? "" : std::string(" of ") + optLevelName(o.opt_level)));
      }
    }
  }
  LossScalerOptions& s = p.loss_scaler;
  s.dynamic = dynamic;
  s.static_scale = staticScale;
  if (o.min_loss_scale) s.min_scale = *o.min_loss_scale;
  if (o.max_loss_scale) s.max_scale = *o.max_loss_scale;
  if (o.scale_growth_factor) s.growth_factor = *o.scale_growth_factor;
  if (o.scale_backoff_factor) s.backoff_factor = *o.scale_backoff_factor;
  if (o.scale_window) s.window = *o.scale_window;
  if (o.dynamic_init_scale) {
    s.init_scale = *o.dynamic_init_scale;
    if (s.init_scale > s.max_scale) {
      return invalidArgument("dynamic_init_scale " + formatGeneral(s.init_scale) + " exceeds max_loss_scale " + formatGeneral(s.max_scale));
    }
    if (s.init_scale < s.min_scale) {
      return invalidArgument("dynamic_init_scale " + formatGeneral(s.init_scale) + " is below min_loss_scale " + formatGeneral(s.min_scale));
    }
  }
  const std::string err = s.validate();
  if (!err.empty()) return invalidArgument(err);

  p.combine_grad = o.combine_grad.value_or(true);
  p.overflow_check = o.overflow_check;
  if (o.cast_model_outputs) {
    if (!at::isFloatingType(*o.cast_model_outputs) || *o.cast_model_outputs == at::kDouble) {
      return invalidArgument("cast_model_outputs " + dtypeName(*o.cast_model_outputs) + ": expected fp32, fp16 or bf16");
    }
    p.cast_model_outputs = *o.cast_model_outputs;
  }
  return p;
}

std::string Properties::describe() const {
  std::ostringstream os;
  os << "Selected optimization level " << optLevelName(opt_level) << (enabled ? "" : " (amp disabled)") << "\n"
     << "cast_model_type      : " << dtypeName(cast_model_type) << "\n"
     << "patch_ops            : " << (patch_ops ? "true (" + dtypeName(low_precision) + ")" : "false") << "\n"
     << "keep_batchnorm_fp32  : " << (castsModel() && lowPrecisionModel() ? (keep_batchnorm_fp32 ? "true" : "false") : "-")
     << "\n"
     << "master_weights       : " << (master_weights ? "true" : "false") << "\n"
     << "loss_scale           : " << (loss_scaler.dynamic ? std::string("dynamic") : formatGeneral(loss_scaler.static_scale));
  if (loss_scaler.dynamic) {
    os << " (init " << loss_scaler.init_scale << ", growth " << loss_scaler.growth_factor << ", backoff "
       << loss_scaler.backoff_factor << ", window " << loss_scaler.window << ", min " << loss_scaler.min_scale
       << ", max " << loss_scaler.max_scale << ")";
  }
  os << "\n"
     << "num_losses           : " << num_losses << "\n"
     << "combine_grad         : " << (combine_grad ? "true" : "false") << "\n"
     << "overflow_check       : " << overflowCheckName(overflow_check);
  return os.str();
}

}  // namespace npuscope::amp
