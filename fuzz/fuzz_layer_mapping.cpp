// msprobe's layer_mapping.yaml (npuscope compare --layer-mapping; analysis/layer_mapping.h) in
// memory: parseLayerMapping, then, when it parses, the mapping applied to the entries of msprobe's
// own fixture (a MindSpore dump's cells and APIs against a PyTorch dump's modules, with their
// modules from construct.json). Reading either succeeds or gives one error naming a line; every
// rule has names on both sides; every entry of A maps to nothing or to an entry of B.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "npuscope/analysis/layer_mapping.h"

namespace {

using npuscope::DumpEntryRow;

DumpEntryRow row(const char* name, const char* parent) {
  DumpEntryRow e;
  e.step = 0;
  e.name = name;
  e.parent = parent;
  return e;
}

const std::vector<DumpEntryRow>& sideA() {
  static const std::vector<DumpEntryRow> a = {
      row("Tensor.__add__.0.forward", ""),
      row("Mint.logical_or.0.forward", "Cell.net.module.lm.embedding.word_embeddings.VocabParallelEmbedding.forward.0"),
      row("Distributed.all_reduce.0.forward",
          "Cell.net.module.lm.embedding.word_embeddings.reduce_from_mp_region.ReduceFromModelParallelRegion.forward.0"),
      row("Cell.net.module.lm.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
          "Cell.net.module.lm.embedding.Embedding.forward.0"),
      row("Primitive.norm.RmsNorm.0.forward", "Cell.net.module.lm.encoder.layers.0.input_norm.FusedRMSNorm.forward.0"),
      row("Cell.net.module.lm.encoder.layers.0.attention.ParallelAttention.forward.0",
          "Cell.net.module.lm.encoder.layers.0.ParallelTransformerLayer.forward.0"),
      row("Functional.flash_attention_score.0.forward",
          "Cell.net.module.lm.encoder.layers.0.attention.ParallelAttention.forward.0"),
      row("Functional.flash_attention_score.0.backward", ""),
      row("Cell.net.module.lm.encoder.layers.0.input_norm.FusedRMSNorm.backward.0", ""),
      row("Cell.x", ""),
      row("Module..forward.0", ""),
  };
  return a;
}

const std::vector<DumpEntryRow>& sideB() {
  static const std::vector<DumpEntryRow> b = {
      row("Tensor.__add__.0.forward", ""),
      row("Tensor.__or__.0.forward", "Module.module.module.lm.embedding.word_embeddings.VocabParallelEmbedding.forward.0"),
      row("Distributed.all_reduce.0.forward",
          "Module.module.module.lm.embedding.word_embeddings.VocabParallelEmbedding.forward.0"),
      row("Module.module.module.lm.embedding.word_embeddings.VocabParallelEmbedding.forward.0", ""),
      row("NPU.npu_rms_norm.0.forward", "Module.module.module.lm.encoder.layers.0.input_norm.RMSNorm.forward.0"),
      row("Module.module.module.lm.encoder.layers.0.self_attention.ParallelAttention.forward.0", ""),
      row("NPU.npu_fusion_attention.0.forward",
          "Module.module.module.lm.encoder.layers.0.self_attention.core_attention_flash.FlashSelfAttention.forward.0"),
      row("NPU.npu_fusion_attention.0.backward", ""),
  };
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npuscope::compare;
  const auto m = parseLayerMapping(std::string(reinterpret_cast<const char*>(data), size), "layer_mapping.yaml");
  if (!m.isOk()) {
    const std::string& msg = m.status().message();
    if (msg.empty() || msg.find('\n') != std::string::npos || msg.rfind("layer_mapping.yaml: line ", 0) != 0) {
      __builtin_trap();  // one line naming the file and the line
    }
    return 0;
  }
  for (const auto& [cls, rules] : m->by_class) {
    for (const LayerMapping::Rule& r : rules) {
      if (r.from.empty() || r.to.empty()) __builtin_trap();
      for (const auto* segs : {&r.from, &r.to})
        for (const std::string& s : *segs)
          if (s.empty()) __builtin_trap();
    }
  }
  std::set<std::string> names_b;
  for (const DumpEntryRow& e : sideB()) names_b.insert(e.name);
  for (const auto& [from, to] : mapEntries(sideA(), sideB(), m.value())) {
    if (!to.empty() && !names_b.count(to)) __builtin_trap();
  }
  return 0;
}
