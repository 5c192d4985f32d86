"""torch_npu.contrib on npuscope: ``transfer_to_npu`` (CUDA spellings mean the npu)."""
