// The predicted timeline of a real NPU: what the host and the device would do for a step's
// recorded ops. The emulator measures its own CPU doing every op's whole computation; a real
// Ascend host only dispatches (framework work, launch) while the device computes. One
// event-driven pass over a step's ops (in host order) places each op on a predicted host
// timeline and each device kernel on its device's predicted stream, from documented per-op
// constants and the cost model's device durations alone — never from measured times, so the same
// ops give the same prediction on any machine. docs/device.md, "Predicted timeline", documents
// every parameter and its source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "npuscope/store/status.h"
#include "npuscope/store/trace_reader.h"

namespace npuscope {

struct HostModelParams {
  // Framework cost of one operator call on the host: Python/C++ dispatcher, torch_npu's op
  // adapter (format inference, output allocation), per aten op, nested calls included.
  int64_t dispatch_ns = 10000;
  // An operator without a kernel of its own (a view, a composite calling other operators, a
  // host-only op): the dispatcher's pass.
  int64_t composite_ns = 2000;
  // One autograd node evaluated by the engine in backward (`autograd::engine::evaluate_function`).
  int64_t autograd_node_ns = 3000;
  // Launching one kernel (ACL op execute / aclnn launch): on the host thread without the task
  // queue, on torch_npu's second (dequeue) thread with it.
  int64_t launch_ns = 8000;
  // With the task queue: what the host thread pays to hand one launch to the queue.
  int64_t enqueue_ns = 1500;
  // A synchronisation itself once the device has drained (aclrtSynchronizeStream round trip).
  int64_t sync_ns = 15000;
  // TASK_QUEUE_ENABLE: 1 (torch_npu's default) launches on a second thread.
  bool task_queue = true;
  // Collectives (hcom_* ops) run on each device's communication stream, after the kernels
  // launched before them (HCCL waits on an event of the compute stream), overlapping later
  // backward kernels; a kernel outside backward waits for them (work.wait() makes the compute
  // stream wait). Modeled as HCCL's mesh on a 910B server (every NPU linked to every other by
  // HCCS): an all-reduce is a reduce-scatter then an all-gather, each phase moving 1/n of the
  // data over n-1 links at once. docs/device.md, "Collectives".
  int32_t comm_ranks = 1;                   // ranks of the job (the run's world_size)
  double link_bytes_per_s = 18.3e9;         // one HCCS link: HCCL's own figure for 910B
  int64_t comm_phase_ns = 60000;            // HCCL's static delay per algorithm phase
  // What-if: every device duration multiplied by this (2: twice the work per kernel, e.g. a
  // doubled batch on ops that scale with it).
  double device_scale = 1.0;
};

// How the predicted timeline treats an op (from its name and recorded columns).
enum class PredictedRole : uint8_t {
  kCollective, // an hcom_* op: dispatched, then run on its device's communication stream
  kKernel,     // innermost npu op with a modeled duration: dispatch, then launched onto its stream
  kHostOp,     // an operator with no device kernel (views, host-only ops, composites): composite_ns
  kFallback,   // an op a real torch_npu runs on the host: wait for the device, then its duration
  kAutograd,   // an autograd engine node
  kFree,       // user scopes, autograd node bodies: no cost of their own
};
// Ops inside a kernel or a host fallback are the emulator's own CPU work: no part of a real
// host's or device's timeline, left out.

// One op as the prediction sees it.
struct PredictedInput {
  int64_t id = 0;
  int64_t parent_id = -1;
  int64_t start_ns = 0;         // measured start: only orders the ops
  int32_t device = -1;
  int64_t device_dur_ns = -1;   // modeled device duration, -1: none
  bool host_sync = false;      // recorded (op_events.host_sync); names of isHostSyncOpName count too
  bool backward = false;       // backward work (op_events.is_backward)
  int64_t bytes = -1;          // collectives: the bytes of their tensors, -1: not known
  std::string_view name;
};

struct PredictedOp {
  int64_t id = 0;
  PredictedRole role = PredictedRole::kHostOp;
  int32_t device = -1;
  int64_t host_start_ns = 0;     // from the step's start
  int64_t host_end_ns = 0;
  int64_t device_start_ns = -1;  // kernels only
  int64_t device_dur_ns = -1;
  int32_t depth = 0;             // predicted ops enclosing it (they nest on one host timeline)
};

struct PredictedStep {
  int64_t step = -1;
  int64_t step_ns = 0;         // until both the host and every device are done
  int64_t host_ns = 0;         // the host's part (its last op's end)
  int64_t device_busy_ns = 0;  // kernels' durations summed over devices
  int64_t device_span_ns = 0;  // first kernel start to last kernel end, over devices
  int64_t host_wait_ns = 0;    // the host waiting for the device at synchronisations
  int64_t dispatch_ns = 0;     // host time in dispatch, launch and autograd work
  int64_t kernels = 0;
  int64_t host_ops = 0;        // ops that cost host time
  int64_t syncs = 0;
  int64_t collectives = 0;
  int64_t comm_ns = 0;         // collectives' modeled durations summed
  int64_t comm_wait_ns = 0;    // compute streams waiting for communication (not overlapped)
  int devices = 0;             // devices with kernels
  // Share of the step the busiest-on-average device idles (1 - busy / (devices * step)).
  double deviceIdleShare() const;
  // Share of the step the host waits for the device.
  double hostWaitShare() const;
};

// Host-bound: the device idles more than half the step (it waits for the host); device-bound:
// it idles less, and each device has more work than the host's dispatching; else balanced.
enum class BoundBy { kHost, kDevice, kBalanced };
BoundBy boundBy(const PredictedStep& s);
const char* boundByName(BoundBy b);  // "host-bound", "device-bound", "balanced"

// Ops at which a real host waits for the device by name alone (`.item()`, synchronize, float
// status reads); the recorder adds copies between host and device (op_events.host_sync).
bool isHostSyncOpName(std::string_view name);

// Predicts one step: `ops` are the step's recorded ops, any thread, any order; each step starts
// with an idle device and ends when host and devices are done (as a step ending in `.item()`
// does). `out` (optional) receives every op but those inside kernels, in host order, times from
// the step's start.
PredictedStep predictStep(int64_t step, std::vector<PredictedInput> ops, const HostModelParams& params,
                          std::vector<PredictedOp>* out = nullptr);

PredictedInput predictedInput(const OpSlice& op);
// Whether the ops inside `op` are the emulator's own CPU work (it is a kernel or a host
// fallback): no part of what a real host would run.
bool hidesInnerOps(const OpSlice& op);
// The parameters for a run: the default host model with the run's world size.
HostModelParams hostModelParamsFor(const RunRow& run);
// A collective's modeled duration (`name` hcom_allReduce_, ...; `bytes` its tensors).
int64_t collectiveDurationNs(std::string_view name, int64_t bytes, const HostModelParams& params);
// The bytes of an op's recorded inputs ("[[256, 4]]" with "float"), -1 when not recorded.
int64_t inputBytes(std::string_view shapes, std::string_view dtypes);

// Places predicted steps on the recording's clock, as export and the workbench draw them: each
// at its recorded start, or right after the previous predicted step while that one still runs.
class PredictedStepPlacer {
 public:
  int64_t place(int64_t recorded_start_ns, int64_t step_ns) {
    const int64_t at = end_ > recorded_start_ns ? end_ : recorded_start_ns;
    end_ = at + step_ns;
    return at;
  }

 private:
  int64_t end_ = INT64_MIN;
};

// Every step of a recorded run (or those in `range`) that holds ops, in step order. Steps are
// read a few at a time, so a long run is not held in memory.
StatusOr<std::vector<PredictedStep>> predictRun(TraceReader& reader, int64_t run_id, const HostModelParams& params,
                                                const std::optional<StepRange>& range = std::nullopt);

// A run's predicted steps summed: the middle (median) step time, and the shares over all steps.
struct PredictedSummary {
  int64_t steps = 0;
  int64_t median_step_ns = 0;
  int64_t total_ns = 0;        // steps' predicted times summed
  int64_t device_busy_ns = 0;  // over devices
  int64_t host_wait_ns = 0;
  int64_t dispatch_ns = 0;
  int64_t kernels = 0, host_ops = 0, syncs = 0;
  int64_t collectives = 0, comm_ns = 0, comm_wait_ns = 0;
  int devices = 0;             // most devices any step used
  PredictedStep total() const;  // the sums as one step (for its shares)
};
PredictedSummary summarizePrediction(const std::vector<PredictedStep>& steps);

// "1.23 ms: the host dispatches 480 ops in 0.90 ms, the device is busy 0.70 ms (57.0 %), the
// host waits 0.20 ms at 3 syncs: balanced" — how report, advisor and GUI state a step.
std::string describePredictedStep(const PredictedStep& s);

}  // namespace npuscope
