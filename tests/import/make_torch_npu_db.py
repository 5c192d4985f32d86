#!/usr/bin/python3
"""Writes torch_npu's database export (ascend_pytorch_profiler_{rank}.db) of a torch_npu text export.

    /usr/bin/python3 make_torch_npu_db.py RANK_ascend_pt OUT.db

There is no real .db sample here, so the importer's tests build one from the real text sample
(tests/data/traces/ascend_alexnet_rank0_ascend_pt): the same events, laid out in the tables and
columns torch_npu's db export has. The layout follows torch_npu's own writers (Ascend/pytorch
master @ 9e73e708, torch_npu/profiler/analysis: prof_common_func/_constant.py TableColumnsManager
and DbConstant, prof_view/prof_db_parse/*, prof_parse/_fwk_file_parser.py get_fwk_api) for
STRING_IDS, PYTORCH_API, CONNECTION_IDS, PYTORCH_CALLCHAINS, ENUM_API_TYPE, MEMORY_RECORD,
STEP_TIME, META_DATA and RANK_DEVICE_MAP, and msprof's db layout (which torch_npu moves into the
file; table list in docs/import.md) for CANN_API, TASK, COMPUTE_TASK_INFO, COMMUNICATION_OP,
ENUM_HCCL_DATA_TYPE and NPU_INFO. Names are ids into STRING_IDS, times integer ns, globalTid is
pid << 32 | tid.

From ASCEND_PROFILER_OUTPUT/:
  trace_view.json     cpu_op / enqueue / dequeue / python_function events -> PYTORCH_API (types
                      50001 / 50002 / 50003); the CANN process -> CANN_API; the Ascend Hardware
                      process -> TASK; the HCCL "Group N Communication" lanes -> COMMUNICATION_OP;
                      ProfilerStep#N -> STEP_TIME.
  kernel_details.csv  -> COMPUTE_TASK_INFO for the TASK row of the same name starting within 1 us.
  memory_record.csv   rows other than APP -> MEMORY_RECORD (bytes).
  operator_memory.csv -> OP_MEMORY (bytes, ns).
  npu_module_mem.csv  -> NPU_MODULE_MEM (bytes, ns), the components named in ENUM_MODULE.
  communication.json  the collectives' group names.
and profiler_info_*.json (rank) and profiler_metadata.json (META_DATA) beside it.

Torch ops get CONNECTION_IDS as torch_npu computes them: the connection ids of the node-level
launches (CANN_API type 10000, name 'launch') that ran inside the Dequeue of an Enqueue the op
holds (the innermost op around the Enqueue); queue rows carry their correlation id + (5 << 28).
The chip name in NPU_INFO is not in the text export: it is written as 'unknown'.
"""
import csv
import decimal
import glob
import json
import os
import sqlite3
import sys

START_CONNECTION_ID_FWK_API = 5 << 28
API_TYPES = [(20000, "acl"), (15000, "model"), (10000, "node"), (5500, "communication"), (5000, "runtime"),
             (50001, "op"), (50002, "queue"), (50003, "trace"), (50004, "mstx")]
CANN_LEVELS = {"AscendCL": 20000, "Model": 15000, "Node": 10000, "Hccl": 5500, "Runtime": 5000}
HCCL_DATA_TYPES = [(0, "INT8"), (1, "INT16"), (2, "INT32"), (3, "FP16"), (4, "FP32"), (5, "INT64"), (6, "UINT64"),
                   (7, "UINT8"), (8, "UINT16"), (9, "UINT32"), (10, "FP64"), (11, "BFP16"), (12, "INT128"),
                   (255, "RESERVED"), (65534, "N/A"), (65535, "INVALID_TYPE")]

SCHEMA = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "ENUM_HCCL_DATA_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "PYTORCH_API": "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, "
                   "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, "
                   "callchainId INTEGER, type INTEGER",
    "CONNECTION_IDS": "id INTEGER, connectionId INTEGER",
    "PYTORCH_CALLCHAINS": "id INTEGER, stack INTEGER, stackDepth INTEGER",
    "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER PRIMARY KEY, "
                "name INTEGER",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
            "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER, mixBlockDim INTEGER, "
                         "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                         "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, "
                         "attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
    "COMMUNICATION_OP": "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, groupName INTEGER, "
                        "opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, "
                        "count NUMERIC, opType INTEGER, deviceId INTEGER",
    "MEMORY_RECORD": "component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, "
                     "totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "OP_MEMORY": "name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER, activeReleaseTime INTEGER, "
                 "duration INTEGER, activeDuration INTEGER, allocationTotalAllocated INTEGER, "
                 "allocationTotalReserved INTEGER, allocationTotalActive INTEGER, releaseTotalAllocated INTEGER, "
                 "releaseTotalReserved INTEGER, releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "NPU_MODULE_MEM": "moduleId INTEGER, timestampNs INTEGER, totalReserved INTEGER, deviceId INTEGER",
    "ENUM_MODULE": "id INTEGER PRIMARY KEY, name TEXT",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "META_DATA": "name TEXT, value TEXT",
    "NPU_INFO": "id INTEGER, name TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
}


def ns(us):
    """Decimal µs (text or Decimal) -> integer ns, sub-ns rounded half up, as the importer does."""
    d = decimal.Decimal(str(us).strip().strip("\t"))
    return int((d * 1000).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


class Strings:
    """STRING_IDS: msprof's strings from 0, torch_npu's framework strings from 1 << 28."""

    def __init__(self):
        self.ids = {}
        self.next = {"cann": 0, "fwk": 1 << 28}

    def id(self, text, domain="cann"):
        if text is None or text == "":
            return None
        if text not in self.ids:
            self.ids[text] = self.next[domain]
            self.next[domain] += 1
        return self.ids[text]


def inside(inner, outer):
    return outer["start"] < inner["start"] and inner["end"] < outer["end"]


def main(folder, out):
    output = os.path.join(folder, "ASCEND_PROFILER_OUTPUT")
    with open(os.path.join(output, "trace_view.json")) as f:
        events = json.load(f, parse_float=decimal.Decimal)
    process = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e.get("ph") == "M" and e["name"] == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    for e in complete:
        e["start"] = ns(e["ts"])
        e["end"] = e["start"] + ns(e.get("dur", 0))
    python_pid = next(pid for pid, name in process.items() if name == "Python")
    device = 0
    rank = -1
    for info in glob.glob(os.path.join(folder, "profiler_info*.json")):
        with open(info) as f:
            rank = json.load(f).get("rank_id", -1)

    s = Strings()
    rows = {name: [] for name in SCHEMA}

    # CANN_API: the CANN process, named level@api in trace_view.
    cann = []
    for e in complete:
        if process.get(e["pid"]) != "CANN":
            continue
        level, _, api = e["name"].partition("@")
        row = {"start": e["start"], "end": e["end"], "type": CANN_LEVELS[level], "tid": e["tid"],
               "conn": e["args"]["connection_id"], "api": api}
        cann.append(row)
        rows["CANN_API"].append((row["start"], row["end"], row["type"], python_pid << 32 | e["tid"], row["conn"],
                                 s.id(api)))
    assert len({r["conn"] for r in cann}) == len(cann), "CANN_API.connectionId is its primary key"

    # PYTORCH_API: torch ops, the task queue, Python frames.
    ops = [e for e in complete if e.get("cat") == "cpu_op"]
    enqueues = [e for e in complete if e.get("cat") == "enqueue"]
    dequeues = [e for e in complete if e.get("cat") == "dequeue"]
    # Node launches -> the innermost torch op around the Enqueue of the Dequeue that holds them
    # (torch_npu's FwkApiDbParser); without a task queue, the innermost op around the launch.
    launches = {id(op): [] for op in ops}
    enqueue_of = {e["args"]["correlation_id"]: e for e in enqueues}

    def innermost_op(at, tid):
        best = None
        for op in ops:
            if op["tid"] == tid and inside(at, op) and (best is None or op["start"] > best["start"]):
                best = op
        return best

    for launch in cann:
        if launch["type"] != 10000 or launch["api"] != "launch":
            continue
        at = launch
        deq = next((d for d in dequeues if d["tid"] == launch["tid"] and inside(launch, d)), None)
        if deq is not None:
            at = enqueue_of.get(deq["args"]["correlation_id"])
            if at is None:
                continue
        op = innermost_op(at, at["tid"])
        if op is not None:
            launches[id(op)].append(launch["conn"])

    connection_ids = []

    def connection(ids):
        connection_ids.append(ids)
        return len(connection_ids) - 1

    callchains = []
    for e in sorted(ops + enqueues + dequeues, key=lambda e: e["start"]):
        args = e.get("args", {})
        gtid = python_pid << 32 | e["tid"]
        if e["cat"] == "cpu_op":
            conn = connection(launches[id(e)]) if launches[id(e)] else None
            chain = None
            if args.get("Call stack"):
                chain = len(callchains)
                callchains.append(args["Call stack"].split(";\r\n"))
            rows["PYTORCH_API"].append((str(e["start"]), str(e["end"]), gtid, conn, s.id(e["name"], "fwk"),
                                        args.get("Sequence number", -1), args.get("Fwd thread id"),
                                        s.id(args.get("Input type"), "fwk"), s.id(args.get("Input Dims"), "fwk"),
                                        chain, 50001))
        else:
            name = e["name"]
            if e["cat"] == "enqueue":
                deq = next((d for d in dequeues if d["args"]["correlation_id"] == args["correlation_id"]), None)
                if deq is not None:
                    name += "@" + deq["name"].partition("@")[2]
            conn = connection([args["correlation_id"] + START_CONNECTION_ID_FWK_API])
            rows["PYTORCH_API"].append((str(e["start"]), str(e["end"]), gtid, conn, s.id(name, "fwk"),
                                        None, None, None, None, None, 50002))
    for e in complete:
        if e.get("cat") == "python_function":
            rows["PYTORCH_API"].append((str(e["start"]), str(e["end"]), python_pid << 32 | e["tid"], None,
                                        s.id(e["name"], "fwk"), None, None, None, None, None, 50003))
    for i, ids in enumerate(connection_ids):
        rows["CONNECTION_IDS"] += [(i, c) for c in ids]
    for i, chain in enumerate(callchains):
        rows["PYTORCH_CALLCHAINS"] += [(i, s.id(frame, "fwk"), depth) for depth, frame in enumerate(chain)]

    # MEMORY_RECORD (bytes), and the device index of the run.
    with open(os.path.join(output, "memory_record.csv"), newline="") as f:
        for r in csv.DictReader(f):
            device = int(r["Device Type"].partition(":")[2] or 0)
            if r["Component"] == "APP":
                continue
            as_bytes = lambda mb: int(float(mb) * 1048576 + 0.5) if mb else 0
            rows["MEMORY_RECORD"].append((s.id(r["Component"]), ns(r["Timestamp(us)"]), as_bytes(r["Total Allocated(MB)"]),
                                          as_bytes(r["Total Reserved(MB)"]), as_bytes(r["Total Active(MB)"]),
                                          int(r["Stream Ptr"]) if r["Stream Ptr"] else None, device))

    # OP_MEMORY (bytes, ns; a release never seen: NULL) from operator_memory.csv.
    as_bytes_kb = lambda kb: int(decimal.Decimal(kb) * 1024 + decimal.Decimal("0.5"))
    with open(os.path.join(output, "operator_memory.csv"), newline="") as f:
        for r in csv.DictReader(f):
            released = r["Release Time(us)"].strip()
            rows["OP_MEMORY"].append((s.id(r["Name"]), as_bytes_kb(r["Size(KB)"]), ns(r["Allocation Time(us)"]),
                                      ns(released) if released else None, None, None, None, None, None, None, None,
                                      None, None, int(r["Stream Ptr"]) if r["Stream Ptr"] else None,
                                      int(r["Device Type"].partition(":")[2] or 0)))
    # NPU_MODULE_MEM (bytes, ns; an empty reservation: NULL), its components numbered in ENUM_MODULE.
    modules = {}
    with open(os.path.join(output, "npu_module_mem.csv"), newline="") as f:
        for r in csv.DictReader(f):
            module = modules.setdefault(r["Component"], len(modules))
            mb = r["Total Reserved(MB)"].strip()
            rows["NPU_MODULE_MEM"].append((module, ns(r["Timestamp(us)"]),
                                           int(decimal.Decimal(mb) * 1048576 + decimal.Decimal("0.5")) if mb else None,
                                           int(r["Device"].partition(":")[2] or 0)))
    rows["ENUM_MODULE"] = [(i, name) for name, i in modules.items()]

    # TASK (+ COMPUTE_TASK_INFO from kernel_details.csv), COMMUNICATION_OP.
    hardware = [e for e in complete if process.get(e["pid"]) == "Ascend Hardware"]
    for i, e in enumerate(hardware):
        a = e["args"]
        e["global_task_id"] = i
        rows["TASK"].append((e["start"], e["end"], device, a.get("connection_id"), i, python_pid,
                             s.id(a["Task Type"]), a.get("Subtask Id"), a["Physic Stream Id"], a["Task Id"],
                             a.get("Model Id")))
    by_name = {}
    for e in hardware:
        by_name.setdefault(e["name"], []).append(e)
    taken = set()
    with open(os.path.join(output, "kernel_details.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["Accelerator Core"] == "HCCL":
                continue  # collectives: COMMUNICATION_OP
            start = ns(r["Start Time(us)"])
            near = [e for e in by_name.get(r["Name"], []) if id(e) not in taken and abs(e["start"] - start) <= 1000]
            if not near:
                continue
            e = min(near, key=lambda e: abs(e["start"] - start))
            taken.add(id(e))
            # The CSV quotes shapes once more than the db stores them ("32,3" -> 32,3).
            v = lambda k: s.id(r[k].strip('"')) if r.get(k) not in (None, "", "N/A") else None
            rows["COMPUTE_TASK_INFO"].append((s.id(r["Name"]), e["global_task_id"], int(r["Block Dim"]),
                                              int(r["Mix Block Dim"]), v("Accelerator Core"), v("Type"),
                                              v("Input Formats"), v("Input Data Types"), v("Input Shapes"),
                                              v("Output Formats"), v("Output Data Types"), v("Output Shapes"), None,
                                              v("OP State"), v("HF32 Eligible")))
    groups = {}
    comm = os.path.join(output, "communication.json")
    if os.path.exists(comm):
        with open(comm) as f:
            for step in json.load(f).values():
                for kind in step.values():
                    for key in kind:
                        op, _, group = key.partition("@")
                        groups[op] = group
    data_types = {name: i for i, name in HCCL_DATA_TYPES}
    op_id = 0
    for e in complete:
        lane = thread.get((e["pid"], e["tid"]), "")
        if process.get(e["pid"]) != "HCCL" or not lane.startswith("Group"):
            continue
        a = e["args"]
        rows["COMMUNICATION_OP"].append((s.id(e["name"]), e["start"], e["end"], a.get("connection_id"),
                                         s.id(groups.get(e["name"], lane)), op_id, None, None,
                                         data_types.get(a.get("data_type"), 65534), s.id(a.get("alg_type")),
                                         a.get("count"), s.id(e["name"].rsplit("_", 3)[0] + "_"), device))
        op_id += 1

    for e in ops:
        if e["name"].startswith("ProfilerStep#"):
            rows["STEP_TIME"].append((int(e["name"].split("#")[-1]), e["start"], e["end"]))
    rows["META_DATA"] += [("SCHEMA_VERSION", "1.1.1"), ("SCHEMA_VERSION_MAJOR", "1"), ("SCHEMA_VERSION_MINOR", "1"),
                          ("SCHEMA_VERSION_MICRO", "1")]
    metadata = os.path.join(folder, "profiler_metadata.json")
    if os.path.exists(metadata):
        with open(metadata) as f:
            rows["META_DATA"] += [(str(k), json.dumps(v)) for k, v in json.load(f).items()]
    rows["NPU_INFO"].append((device, "unknown"))
    rows["RANK_DEVICE_MAP"].append((rank, device))
    rows["ENUM_API_TYPE"] = API_TYPES
    rows["ENUM_HCCL_DATA_TYPE"] = HCCL_DATA_TYPES
    rows["STRING_IDS"] = [(i, text) for text, i in s.ids.items()]

    if os.path.exists(out):
        os.remove(out)
    db = sqlite3.connect(out)
    for table, columns in SCHEMA.items():
        db.execute(f"CREATE TABLE {table} ({columns})")
        if rows[table]:
            marks = ",".join("?" * len(rows[table][0]))
            db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows[table])
    db.execute("CREATE INDEX TaskIndex ON TASK (startNs, globalTaskId)")
    db.commit()
    db.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_torch_npu_db.py RANK_ascend_pt OUT.db")
    main(sys.argv[1], sys.argv[2])
