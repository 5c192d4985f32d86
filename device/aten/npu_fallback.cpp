// Zero-copy boxed fallback.
//
// Every npu tensor argument is aliased as a CPU tensor over the same memory, the op's CPU kernel
// runs, and its results are handed back as npu tensors: in-place and out= results are the npu
// arguments themselves (resizes carried back), views share the npu argument's storage, fresh
// results adopt the memory the CPU kernel allocated from the device pool. Nothing is copied.
//
// Low precision: when an op reads fp16/bf16 npu tensors, its math runs in fp32 and results are
// rounded to the dtype the op would have produced (the Cube's fp16-in / fp32-accumulate /
// fp16-out behaviour, and the only way to run ops libtorch 1.13 lacks Half kernels for).
// Views are exempt: they move no data and must keep aliasing their base.
#include "aten/npu_fallback.h"

#include <ATen/ATen.h>
#include <ATen/core/function_schema.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <limits>
#include <string>

#include "aten/npu_tensor.h"
#include "npuscope/device/npu.h"

namespace npuscope::npu::aten {
namespace {

// One npu tensor argument (possibly inside a list) and what stands in for it on the CPU.
struct Slot {
  at::Tensor npu;          // the caller's tensor
  at::Tensor alias;        // CPU tensor over npu's memory
  at::Tensor compute;      // what the kernel gets: alias, or an fp32 copy of it
  const void* alias_data;  // alias data pointer before the kernel
  bool is_write = false;   // the schema says the op writes it
};

bool schemaIsView(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns()) {
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  }
  return false;
}

bool argIsScalarType(const c10::Argument& a) {
  const auto& t = a.real_type();
  if (t->kind() == c10::TypeKind::ScalarTypeType) return true;
  if (t->kind() == c10::TypeKind::OptionalType) {
    return t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::ScalarTypeType;
  }
  return false;
}

bool argIsDevice(const c10::Argument& a) {
  const auto& t = a.type();
  if (t->kind() == c10::TypeKind::DeviceObjType) return true;
  if (t->kind() == c10::TypeKind::OptionalType) {
    return t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::DeviceObjType;
  }
  return false;
}

// The floating dtype a low-precision op's floating results are rounded to, when the op did not
// name one: torch's type promotion over the floating tensor arguments (dimensioned tensors win
// over zero-dim ones), except for normalisations, whose result follows their input.
c10::ScalarType promotedFloatType(const c10::FunctionSchema& schema, const c10::SmallVector<Slot, 8>& slots) {
  const std::string& name = schema.name();
  const bool follows_input = name.find("_norm") != std::string::npos || name.find("norm_") != std::string::npos;
  c10::ScalarType dimmed = c10::ScalarType::Undefined, zerodim = c10::ScalarType::Undefined;
  for (const auto& s : slots) {
    const auto st = s.npu.scalar_type();
    if (!at::isFloatingType(st)) continue;
    if (follows_input) return st;
    auto& acc = s.npu.dim() > 0 ? dimmed : zerodim;
    acc = acc == c10::ScalarType::Undefined ? st : c10::promoteTypes(acc, st);
  }
  return dimmed != c10::ScalarType::Undefined ? dimmed : zerodim;
}

struct OpState {
  DeviceThread& thread = deviceThread();
  c10::SmallVector<Slot, 8> slots;
  int device = -1;
  bool low_precision = false;
  c10::ScalarType explicit_target = c10::ScalarType::Undefined;  // a dtype the op was asked for
  bool contiguous_results = false;  // new results in the default layout (npuFallbackContiguous)
};

at::Tensor prepare(OpState& st, const at::Tensor& t, bool is_write) {
  if (!isNpu(t)) return t;
  Slot& s = st.slots.emplace_back();
  s.npu = t;
  s.alias = aliasAsCpu(st.thread, t);
  s.alias_data = s.alias.unsafeGetTensorImpl()->storage().data();
  s.is_write = is_write;
  s.compute = st.low_precision && isLowPrecision(t.scalar_type()) ? upcast(s.alias) : s.alias;
  return s.compute;
}

// Maps one CPU result back to the npu world.
at::Tensor finishResult(OpState& st, const c10::FunctionSchema& schema, const at::Tensor& r, c10::ScalarType target) {
  if (!r.defined() || r.device().type() != c10::kCPU) return r;
  c10::TensorImpl* impl = r.unsafeGetTensorImpl();
  for (const auto& s : st.slots) {
    if (impl == s.compute.unsafeGetTensorImpl()) return s.npu;  // in-place / out=
  }
  c10::StorageImpl* rst = impl->storage().unsafeGetStorageImpl();
  for (const auto& s : st.slots) {
    if (rst == s.alias.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl()) {
      return npuViewLike(s.npu, r);  // a view of an npu argument
    }
  }
  checkDtypeSupported(r.scalar_type(), schema.name().c_str());
  if (st.low_precision && r.scalar_type() == c10::kFloat && isLowPrecision(target)) {
    return wrapAsNpu(downcast(r, target, st.device), st.device);
  }
  checkFloatStatus(r, st.device);
  if (st.contiguous_results && !r.is_contiguous()) return wrapAsNpu(r.contiguous(), st.device);
  return wrapAsNpu(r, st.device);
}

// The op's device (its first npu tensor's; else the current one) and whether this is
// low-precision math (an fp16/bf16 npu tensor among the arguments of an op that is not a view).
void findDevice(OpState& st, const c10::FunctionSchema& schema, const c10::IValue* args, size_t nargs) {
  const bool is_view = schemaIsView(schema);
  auto visit = [&](const at::Tensor& t) {
    if (!isNpu(t)) return;
    if (st.device < 0) st.device = deviceIndex(t);
    if (!is_view && isLowPrecision(t.scalar_type())) st.low_precision = true;
  };
  for (size_t i = 0; i < nargs; ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor());
    }
  }
  if (st.device < 0) st.device = npu::current_device();
}

// One argument for the CPU kernel: npu tensors swapped for CPU stand-ins (fp32 for
// low-precision math), dtype and device arguments rewritten.
void swapArgument(OpState& st, const c10::FunctionSchema& schema, const c10::Argument& arg, c10::IValue& v) {
  // libtorch 1.13's batch-norm schemas update running_mean/running_var in training without
  // marking them (a!): treat them as written, or an fp16 stand-in's update would be dropped.
  const bool is_write = (arg.alias_info() && arg.alias_info()->isWrite()) || arg.name() == "running_mean" ||
                        arg.name() == "running_var";
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (isNpu(t)) {
      v = prepare(st, t, is_write);
    } else if (!is_write && t.defined() && t.dim() == 0 && t.scalar_type() == c10::kDouble && t.device().is_cpu() &&
               !t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A 0-dim CPU double beside npu tensors is a scalar (the device has no fp64): libtorch's
      // C++ autograd passes Scalars so (MulBackward1: grad * scalar_to_tensor(other)), and
      // between two 0-dim tensors it would otherwise promote the result to double.
      at::Tensor w = at::scalar_tensor(t.item<double>(), t.options());
      w.unsafeGetTensorImpl()->set_wrapped_number(true);
      v = w;
    }
  } else if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(prepare(st, t, is_write));
    v = out;
  } else if (v.isList() && arg.type()->kind() == c10::TypeKind::ListType) {
    const auto& elems = v.toListRef();
    bool any_tensor = false;
    for (const auto& e : elems) any_tensor |= e.isTensor();
    if (any_tensor) {
      c10::List<c10::optional<at::Tensor>> out;
      for (const auto& e : elems) {
        if (e.isTensor()) out.push_back(prepare(st, e.toTensor(), is_write));
        else out.push_back(c10::nullopt);
      }
      v = out;
    }
  } else if (v.isInt() && argIsScalarType(arg)) {
    const auto s = static_cast<c10::ScalarType>(v.toInt());
    checkDtypeSupported(s, schema.name().c_str());
    st.explicit_target = s;
    if (st.low_precision && isLowPrecision(s)) v = static_cast<int64_t>(c10::kFloat);
  } else if (v.isDevice() && argIsDevice(arg) && v.toDevice().type() == kDeviceType) {
    v = c10::Device(c10::kCPU);
  } else if (st.low_precision && v.isBool() && arg.name() == "half_to_float" && v.toBool()) {
    v = false;  // the kernel now sees fp32 input; the result stays fp32 as asked
    st.explicit_target = c10::kFloat;
  }
}

// Writes into npu arguments: fp32 stand-ins rounded back, or resizes carried over.
void writeBack(OpState& st) {
  for (auto& s : st.slots) {
    if (!s.is_write) continue;
    if (s.compute.unsafeGetTensorImpl() != s.alias.unsafeGetTensorImpl()) {
      if (s.compute.sizes() != s.npu.sizes()) {
        s.npu.resize_(s.compute.sizes());
        s.alias = aliasAsCpu(st.thread, s.npu);
      }
      copyWithStatus(s.alias, s.compute, st.device);
    } else {
      syncMutatedAlias(s.npu, s.alias, s.alias_data);
      checkFloatStatus(s.alias, st.device);
    }
  }
}

// The CPU results mapped back to the npu world (rounded to the op's floating dtype for
// low-precision math).
void finishResults(OpState& st, const c10::FunctionSchema& schema, c10::IValue* results, size_t nret) {
  c10::ScalarType target = st.explicit_target;
  if (st.low_precision && target == c10::ScalarType::Undefined) target = promotedFloatType(schema, st.slots);
  for (size_t i = 0; i < nret; ++i) {
    c10::IValue& v = results[i];
    if (v.isTensor()) {
      v = finishResult(st, schema, v.toTensor(), target);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(finishResult(st, schema, t, target));
      v = out;
    }
  }
}

// An overflow among the results (rare) reported with what went in, measured on the inputs'
// stand-ins; then the stand-ins go back to the alias pool.
void settle(OpState& st) {
  if (overflowPending()) {
    c10::SmallVector<at::Tensor, 8> inputs;
    for (const auto& s : st.slots) {
      if (!s.is_write) inputs.push_back(s.compute);
    }
    reportPendingOverflow(inputs);
  }
  for (auto& s : st.slots) {
    s.compute.reset();
    recycleAlias(st.thread, std::move(s.alias));
  }
}

}  // namespace

void runOnCpu(const c10::OperatorHandle& cpu_op, const c10::FunctionSchema& schema, torch::jit::Stack* stack,
              bool contiguous_results, CpuCompute compute) {
  const auto& args = schema.arguments();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;
  OpState st;
  st.contiguous_results = contiguous_results;
  OverflowOpScope overflow_scope;
  const OpObserver observer = npu::InternalScope::active() ? nullptr : npu::op_observer();
  if (observer) observer(OpPhase::kBefore, schema, c10::ArrayRef<c10::IValue>(stack->data() + base, nargs));

  findDevice(st, schema, stack->data() + base, nargs);
  DeviceAllocationScope alloc_scope(st.thread, st.device);
  for (size_t i = 0; i < nargs; ++i) swapArgument(st, schema, args[i], (*stack)[base + i]);
  {
    EmulatorWork inside(st.thread);  // what the CPU kernel dispatches is not recorded
    if (compute != nullptr) {
      compute(cpu_op, stack);
    } else {
      cpu_op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    }
  }
  writeBack(st);
  const size_t nret = schema.returns().size();
  const size_t rbase = stack->size() - nret;
  finishResults(st, schema, stack->data() + rbase, nret);
  settle(st);
  if (observer) observer(OpPhase::kAfter, schema, c10::ArrayRef<c10::IValue>(stack->data() + rbase, nret));
}

void npuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  runOnCpu(op, op.schema(), stack);
}

void npuFallbackContiguous(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  runOnCpu(op, op.schema(), stack, /*contiguous_results=*/true);
}

namespace {

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

// One batch element's gemm as libtorch 1.13's addmm_impl_cpu_ (beta 0, alpha 1) and cpublas::gemm
// set it up for a result with unit stride in its last dimension: false where they would copy an
// operand, leave the result or call their own kernel instead of BLAS (the caller then runs the
// CPU kernel itself).
struct BatchGemm {
  char transa = 'n', transb = 'n';
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  // An operand (matrix strides s) as it is, when its rows are contiguous and at least `rows`
  // apart, or transposed, when its columns are and at least `cols` apart; false: neither (libtorch
  // would copy it).
  static bool operand(const int64_t* s, int64_t rows, int64_t cols, bool* transposed, int64_t* ld) {
    if (s[1] == 1 && s[0] >= std::max<int64_t>(1, rows)) {
      *transposed = false, *ld = s[0];
    } else if (s[0] == 1 && s[1] >= std::max<int64_t>(1, cols)) {
      *transposed = true, *ld = s[1];
    } else {
      return false;
    }
    return true;
  }
  bool set(int64_t rows, int64_t cols, int64_t inner, const int64_t* s1, const int64_t* s2, int64_t out_row_stride) {
    // The result is c transposed (row-major rows x cols = column-major cols x rows): the
    // operands swap, m1 = batch2 (inner x cols), m2 = batch1 (rows x inner).
    const int64_t m64 = cols, n64 = rows, k64 = inner;
    bool ta, tb;
    int64_t la, lb;
    if (!operand(s2, m64, k64, &ta, &la) || !operand(s1, k64, n64, &tb, &lb)) return false;
    int64_t lc = out_row_stride;
    // cpublas's normalize_last_dims
    if (n64 == 1) lc = m64;
    if (ta) {
      if (m64 == 1) la = k64;
    } else if (k64 == 1) {
      la = m64;
    }
    if (tb) {
      if (k64 == 1) lb = n64;
    } else if (n64 == 1) {
      lb = k64;
    }
    // use_blas_gemm
    constexpr int64_t kMax = std::numeric_limits<int>::max();
    if (m64 > kMax || n64 > kMax || k64 > kMax || la > kMax || lb > kMax || lc > kMax) return false;
    if (la < std::max<int64_t>(1, ta ? k64 : m64) || lb < std::max<int64_t>(1, tb ? n64 : k64) ||
        lc < std::max<int64_t>(1, m64)) {
      return false;
    }
    transa = ta ? 't' : 'n', transb = tb ? 't' : 'n';
    m = static_cast<int>(m64), n = static_cast<int>(n64), k = static_cast<int>(k64);
    lda = static_cast<int>(la), ldb = static_cast<int>(lb), ldc = static_cast<int>(lc);
    return true;
  }
};

void bmmOutOnCpu(const c10::OperatorHandle& cpu_op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 3;
  const at::Tensor& b1 = (*stack)[base].toTensor();
  const at::Tensor& b2 = (*stack)[base + 1].toTensor();
  const at::Tensor& out = (*stack)[base + 2].toTensor();
  BatchGemm g;
  const bool blas = b1.dim() == 3 && b2.dim() == 3 && out.dim() == 3 && b1.scalar_type() == at::kFloat &&
                    b2.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && !b1.is_conj() &&
                    !b2.is_conj() && !out.is_conj() && b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1) &&
                    out.sizes() == at::IntArrayRef{b1.size(0), b1.size(1), b2.size(2)} && out.is_contiguous() &&
                    out.numel() > 0 && b1.size(2) > 0 &&
                    // below this libtorch uses its own loops, not BLAS
                    b1.size(2) * b1.size(1) * b2.size(2) >= 400 &&
                    g.set(b1.size(1), b2.size(2), b1.size(2), b1.strides().data() + 1, b2.strides().data() + 1,
                          out.stride(1));
  if (!blas) {
    cpu_op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  const float alpha = 1, beta = 0;
  const float* p1 = b1.data_ptr<float>();
  const float* p2 = b2.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t b = 0; b < b1.size(0); ++b) {
    sgemm_(&g.transa, &g.transb, &g.m, &g.n, &g.k, &alpha, p2 + b * b2.stride(0), &g.lda, p1 + b * b1.stride(0),
           &g.ldb, &beta, po + b * out.stride(0), &g.ldc);
  }
  at::Tensor result = out;
  torch::jit::drop(*stack, 3);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

void npuBmmOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  runOnCpu(op, op.schema(), stack, /*contiguous_results=*/false, &bmmOutOnCpu);
}

}  // namespace npuscope::npu::aten
