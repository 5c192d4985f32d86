// The boxed cast kernels registered at AutocastXPU (autocast_registration.cpp holds the table).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "npuscope/amp/autocast.h"

namespace npuscope::amp::detail {

// Casts the npu tensor arguments on `stack` as `P` says, then redispatches below AutocastXPU.
template <CastPolicy P>
void autocastKernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Creates the registrations on first use (a static library's static initialisers may be dropped
// by the linker, so nothing here relies on them). Idempotent and thread-safe.
void ensureAutocastRegistered();

}  // namespace npuscope::amp::detail
