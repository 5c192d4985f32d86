// The RecordFunction callbacks behind RecordingSession: per-thread op stacks and buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npuscope {
class TraceWriter;
}

namespace npuscope::profiler::recorder {

// Starts delivering ops to `writer` (callbacks enabled; records kept while `keep`).
void start(TraceWriter* writer, bool record_shapes, bool record_memory);
// Whether ops are kept (warmup: callbacks run, records discarded) and whether callbacks run.
void setMode(bool callbacks_on, bool keep);
void setStep(int64_t step);
// Benchmarks only: takes the callbacks out of libtorch altogether and stops keeping memory
// events (the "no profiler" baseline); the next setMode() registers and keeps them again.
void removeCallbacksForBaseline();
// Benchmarks only: registers (true) or removes (false) a callback configured as the recorder's
// (the same scopes, inputs boxed) whose start and end do nothing: what observing ops costs in
// libtorch alone, the floor under any recording. Independent of the recorder's own callback.
void setFloorCallback(bool on);
// Disables the callbacks and hands every thread's remaining records to the writer.
void stop();
// Hands every thread's partial buffers to the writer (at step boundaries, so a step's records
// are committed within the writer's commit interval even when buffers are not full).
void flushAll();
uint64_t recordedOps();
// The id of the innermost op being recorded on the calling thread: the op_events id it will be
// written with, or -1 when none is (outside a recorded step, or no op running). Lock-free.
int64_t currentOpId();
// The innermost op running on the calling thread: its name, whether it is backward work, and
// its op_events id (-1 when it is not being recorded). False when no op runs.
struct CurrentOp {
  int64_t id = -1;
  const char* name = nullptr;  // valid while the op runs
  bool backward = false;
};
bool currentOp(CurrentOp* out);
// Which op a call of the calling thread became (msprobe's API and module entries): watchBegin()
// before the call, watchEnd(its handle) after it gives the id of the first op the call started
// at the stack depth of watchBegin (an API's own op, a module's first op), -1 when the call
// started none or it is not being recorded. Watches nest; ending one ends those begun after it
// (a call that raised never ends its own).
size_t watchBegin();
int64_t watchEnd(size_t handle);

}  // namespace npuscope::profiler::recorder
