// Fused optimizers built by name, for front-ends that hold options as named numbers.
#include <memory>

#include <c10/util/Exception.h>

#include "npuscope/optim/fused_optimizers.h"

namespace npuscope::optim {
namespace {

// Sets the fields of `o` named in `values`; an unknown name throws.
template <typename Options>
void applyOptions(Options& o, const OptionValues& values, const char* cls) {
  for (const auto& [key, value] : values) {
    bool known = false;
    o.visit([&](const char* k, auto& field) {
      if (key == k) {
        field = optionFromDouble<std::decay_t<decltype(field)>>(value);
        known = true;
      }
    });
    if (!known) {
      std::string names;
      o.visit([&](const char* k, auto&) { names += (names.empty() ? "" : ", ") + std::string(k); });
      TORCH_CHECK(false, cls, ": unknown option '", key, "' (expected one of ", names, ")");
    }
  }
}

double lrOf(const OptionValues& values) {
  for (const auto& [key, value] : values) {
    if (key == "lr") return value;
  }
  TORCH_CHECK(false, "NpuFusedSGD: lr is required (torch.optim.SGD has no default learning rate either)");
}

template <typename T, typename Options>
std::shared_ptr<NpuFusedOptimizer> build(const char* cls, const Options& defaults,
                                         const std::vector<std::vector<at::Tensor>>& groups,
                                         const std::vector<OptionValues>& options, FusedOptimizerConfig config) {
  TORCH_CHECK(!groups.empty(), cls, ": no parameter groups");
  TORCH_CHECK(options.size() == groups.size(), cls, ": ", groups.size(), " parameter groups but ", options.size(),
              " option sets");
  std::vector<ParamGroup<Options>> pg;
  for (size_t g = 0; g < groups.size(); ++g) {
    Options o = defaults;
    applyOptions(o, options[g], cls);
    pg.push_back({groups[g], o});
  }
  return std::make_shared<T>(pg, pg.front().options.value(), config);
}

}  // namespace

const std::vector<std::string>& fusedOptimizerNames() {
  static const std::vector<std::string> names{"NpuFusedSGD",   "NpuFusedAdam",      "NpuFusedAdamW",
                                              "NpuFusedAdamP", "NpuFusedLamb",      "NpuFusedAdadelta",
                                              "NpuFusedRMSprop", "NpuFusedRMSpropTF"};
  return names;
}

std::shared_ptr<NpuFusedOptimizer> makeFusedOptimizer(const std::string& name,
                                                      const std::vector<std::vector<at::Tensor>>& groups,
                                                      const std::vector<OptionValues>& options,
                                                      FusedOptimizerConfig config) {
  const std::string& n = name;
  if (n == "NpuFusedSGD" || n == "sgd") {
    TORCH_CHECK(!options.empty(), "NpuFusedSGD: lr is required");
    return build<NpuFusedSGD>("NpuFusedSGD", NpuFusedSGDOptions(lrOf(options.front())), groups, options, config);
  }
  if (n == "NpuFusedAdam" || n == "adam") return build<NpuFusedAdam>("NpuFusedAdam", NpuFusedAdamOptions{}, groups, options, config);
  if (n == "NpuFusedAdamW" || n == "adamw") {
    return build<NpuFusedAdamW>("NpuFusedAdamW", NpuFusedAdamWOptions{}, groups, options, config);
  }
  if (n == "NpuFusedAdamP" || n == "adamp") {
    return build<NpuFusedAdamP>("NpuFusedAdamP", NpuFusedAdamPOptions{}, groups, options, config);
  }
  if (n == "NpuFusedLamb" || n == "lamb") return build<NpuFusedLamb>("NpuFusedLamb", NpuFusedLambOptions{}, groups, options, config);
  if (n == "NpuFusedAdadelta" || n == "adadelta") {
    return build<NpuFusedAdadelta>("NpuFusedAdadelta", NpuFusedAdadeltaOptions{}, groups, options, config);
  }
  if (n == "NpuFusedRMSprop" || n == "rmsprop") {
    return build<NpuFusedRMSprop>("NpuFusedRMSprop", NpuFusedRMSpropOptions{}, groups, options, config);
  }
  if (n == "NpuFusedRMSpropTF" || n == "rmsprop_tf") {
    return build<NpuFusedRMSpropTF>("NpuFusedRMSpropTF", NpuFusedRMSpropTFOptions{}, groups, options, config);
  }
  std::string names;
  for (const auto& c : fusedOptimizerNames()) names += (names.empty() ? "" : ", ") + c;
  TORCH_CHECK(false, "fused optimizer '", name, "': expected one of ", names);
}

}  // namespace npuscope::optim
