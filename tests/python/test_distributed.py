"""torch.distributed's "hccl" backend on the npu (npuscope.distributed): real ranks (processes
started by torch.multiprocessing over loopback TCP), each collective's npu result against the
same collective of c10d's own Gloo on CPU tensors in the same ranks and against the value
worked out here; DistributedDataParallel on 2 and 4 ranks against one process training on the
whole batch; init by env:// as torchrun sets it; collectives recorded as hcom_* ops."""
import datetime
import os
import socket
import sqlite3

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npuscope


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, world, *args):
    mp.spawn(fn, args=(world, free_port()) + args, nprocs=world, join=True)


# A rank that fails makes its peers' next collective fail after this, not after c10d's 30 minutes.
TIMEOUT = datetime.timedelta(seconds=60)


# A rank still running this long after it started is hung (every test takes seconds): it prints
# every thread's Python stack and exits, so the test fails with where it was instead of waiting
# for CTest's timeout.
RANK_WATCHDOG_S = 100


def watchdog():
    import faulthandler
    faulthandler.dump_traceback_later(RANK_WATCHDOG_S, exit=True)


def init(rank, world, port):
    watchdog()
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", world_size=world, rank=rank,
                            timeout=TIMEOUT)
    assert dist.get_backend() == "hccl"


# ---- collectives -----------------------------------------------------------------------------
def collectives(rank, world, port):
    init(rank, world, port)
    cpu_group = dist.new_group(backend="gloo")  # the reference: c10d's Gloo on CPU tensors

    def both(make, op):
        """Runs `op` on an npu tensor (hccl) and on the same CPU tensor (gloo); returns both."""
        npu_t, cpu_t = make().npu(), make()
        op(npu_t, None)
        op(cpu_t, cpu_group)
        assert npuscope.is_npu(npu_t)
        return npu_t.cpu(), cpu_t

    # allreduce: sum and max of rank-dependent values
    a, b = both(lambda: torch.arange(6, dtype=torch.float32) * (rank + 1), lambda t, g: dist.all_reduce(t, group=g))
    expected = torch.arange(6, dtype=torch.float32) * sum(r + 1 for r in range(world))
    assert torch.equal(a, expected) and torch.equal(a, b)
    a, b = both(lambda: torch.full((3,), float(rank)), lambda t, g: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g))
    assert torch.equal(a, torch.full((3,), float(world - 1))) and torch.equal(a, b)
    # fp16 allreduce (what AMP's fp16 gradients would use)
    a, b = both(lambda: torch.full((4,), 0.5, dtype=torch.float16), lambda t, g: dist.all_reduce(t, group=g))
    assert a.dtype == torch.float16 and torch.equal(a, b) and torch.equal(a, torch.full((4,), 0.5 * world).half())
    # broadcast from the last rank
    a, b = both(lambda: torch.arange(5.0) + 10 * rank, lambda t, g: dist.broadcast(t, src=world - 1, group=g))
    assert torch.equal(a, torch.arange(5.0) + 10 * (world - 1)) and torch.equal(a, b)
    # allgather
    outs = [torch.zeros(2).npu() for _ in range(world)]
    dist.all_gather(outs, torch.full((2,), float(rank)).npu())
    assert [o.cpu().tolist() for o in outs] == [[float(r)] * 2 for r in range(world)]
    # reduce_scatter (Gloo has none: allreduce of the flat inputs, then this rank's part)
    out = torch.zeros(3).npu()
    dist.reduce_scatter(out, [torch.full((3,), float(rank * world + i)).npu() for i in range(world)])
    assert out.cpu().tolist() == [float(sum(r * world + rank for r in range(world)))] * 3
    # reduce to rank 0
    t = torch.ones(2).npu() * (rank + 1)
    dist.reduce(t, dst=0)
    if rank == 0:
        assert t.cpu().tolist() == [float(sum(range(1, world + 1)))] * 2
    # Gloo works on its own TensorImpls, never the caller's (a CPU tensor's shallow copy): a
    # Python-owned tensor released last on Gloo's thread needs the GIL, and teardown that joins
    # that thread while holding the GIL (DDP's Reducer destroying the group) deadlocked.
    t = torch.ones(3)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert all(r._cdata != t._cdata for r in w.result())
    assert torch.equal(t, torch.full((3,), float(world)))
    # barrier, send / recv around a ring
    dist.barrier()
    send = torch.tensor([float(rank), 100.0 + rank]).npu()
    recv = torch.zeros(2).npu()
    if rank % 2 == 0:
        dist.send(send, dst=(rank + 1) % world)
        dist.recv(recv, src=(rank - 1) % world)
    else:
        dist.recv(recv, src=(rank - 1) % world)
        dist.send(send, dst=(rank + 1) % world)
    src = (rank - 1) % world
    assert recv.cpu().tolist() == [float(src), 100.0 + src]
    # gather to rank 0, scatter from rank 0
    mine = torch.full((2,), float(rank * 3)).npu()
    got = [torch.zeros(2).npu() for _ in range(world)] if rank == 0 else None
    dist.gather(mine, gather_list=got, dst=0)
    if rank == 0:
        assert [g.cpu().tolist() for g in got] == [[float(r * 3)] * 2 for r in range(world)]
    out = torch.zeros(3).npu()
    parts = [torch.full((3,), 10.0 + r).npu() for r in range(world)] if rank == 0 else None
    dist.scatter(out, scatter_list=parts, src=0)
    assert out.cpu().tolist() == [10.0 + rank] * 3
    # all-to-all: rank r sends value 100 r + k to rank k
    send_t = torch.tensor([100.0 * rank + k for k in range(world)]).npu()
    recv_t = torch.zeros(world).npu()
    dist.all_to_all_single(recv_t, send_t)
    assert recv_t.cpu().tolist() == [100.0 * k + rank for k in range(world)]
    # flat allgather into one tensor
    flat = torch.zeros(world * 2).npu()
    dist._all_gather_base(flat, torch.full((2,), float(rank)).npu())
    assert flat.cpu().tolist() == [float(r) for r in range(world) for _ in range(2)]
    # async work
    t = torch.ones(1000).npu()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert t.cpu().eq(world).all()
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_gloo_on_cpu(world):
    spawn(collectives, world)


# ---- DistributedDataParallel -----------------------------------------------------------------
BATCH, STEPS = 12, 4


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, BATCH, 8, generator=g), torch.randn(STEPS, BATCH, 3, generator=g)


def reference_params():
    """One process, the whole batch, on CPU."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = data()
    for x, y in zip(xs, ys):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def ddp_rank(rank, world, port, out_dir, no_sync):
    init(rank, world, port)
    model = make_model().npu()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    xs, ys = data()
    per = BATCH // world
    for x, y in zip(xs, ys):
        x, y = x[rank * per:(rank + 1) * per].npu(), y[rank * per:(rank + 1) * per].npu()
        opt.zero_grad()
        if no_sync:
            # Two micro-batches, gradients accumulated locally, averaged once (DDP.no_sync).
            half = per // 2
            with ddp.no_sync():
                (torch.nn.functional.mse_loss(ddp(x[:half]), y[:half]) * 0.5).backward()
            (torch.nn.functional.mse_loss(ddp(x[half:]), y[half:]) * 0.5).backward()
        else:
            torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    torch.save([p.detach().cpu() for p in model.parameters()], os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.parametrize("world,no_sync", [(2, False), (4, False), (2, True)])
def test_ddp_matches_one_process_on_the_whole_batch(tmp_path, world, no_sync):
    spawn(ddp_rank, world, str(tmp_path), no_sync)
    ref = reference_params()
    for rank in range(world):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        for g, r in zip(got, ref):
            # fp32 sums in another order: within 1e-5
            assert torch.allclose(g, r, atol=1e-5, rtol=1e-5), (rank, (g - r).abs().max())
    first = torch.load(tmp_path / "rank0.pt")
    for rank in range(1, world):
        assert all(torch.equal(a, b) for a, b in zip(first, torch.load(tmp_path / f"rank{rank}.pt")))


def unused_rank(rank, world, port):
    init(rank, world, port)

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.used, self.unused = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.used(self.body(x))

    torch.manual_seed(0)
    model = TwoHeads().npu()
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    for _ in range(2):
        ddp(torch.randn(2, 4).npu()).sum().backward()
    assert model.unused.weight.grad is None
    # gradients are averaged: every rank holds the same
    grads = [torch.zeros_like(model.body.weight.grad) for _ in range(world)]
    dist.all_gather(grads, model.body.weight.grad)
    assert all(torch.equal(grads[0].cpu(), g.cpu()) for g in grads)
    dist.destroy_process_group()


def test_ddp_find_unused_parameters():
    spawn(unused_rank, 2)


# ---- env:// as torchrun sets it --------------------------------------------------------------
def env_rank(rank, world, port):
    watchdog()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    dist.init_process_group(backend="hccl", timeout=TIMEOUT)  # env:// by default
    local = int(os.environ["LOCAL_RANK"])
    npuscope.npu.set_device(local)
    t = torch.ones(2).to(f"npu:{local}")
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(world)] * 2
    assert npuscope.format_device(t.device) == f"npu:{local}"
    dist.destroy_process_group()


def test_env_init_and_one_npu_per_local_rank():
    spawn(env_rank, 2)


# ---- recording -------------------------------------------------------------------------------
def recorded_rank(rank, world, port, db_dir):
    init(rank, world, port)
    with npuscope.profile(db=os.path.join(db_dir, f"rank{rank}.db")) as prof:
        for _ in range(2):
            t = torch.ones(256, 4).npu()
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
            prof.step()
    dist.destroy_process_group()


def test_collectives_are_recorded_as_hcom_ops(tmp_path):
    spawn(recorded_rank, 2, str(tmp_path))
    for rank in range(2):
        con = sqlite3.connect(tmp_path / f"rank{rank}.db")
        rows = con.execute("SELECT s.value, e.device, sh.value, COUNT(*) FROM op_events e"
                           " JOIN strings s ON s.id = e.name_id LEFT JOIN strings sh ON sh.id = e.shapes_id"
                           " WHERE s.value LIKE 'hcom_%' GROUP BY s.value ORDER BY s.value").fetchall()
        con.close()
        assert rows == [("hcom_allReduce_", 0, "[[256, 4]]", 2), ("hcom_broadcast_", 0, "[[256, 4]]", 2)], rows
        con = sqlite3.connect(tmp_path / f"rank{rank}.db")
        assert con.execute("SELECT rank, world_size FROM runs").fetchall() == [(rank, 2)]
        con.close()


# ---- the cluster report ----------------------------------------------------------------------
SLOW_MS, CLUSTER_STEPS = 50, 4


def cluster_rank(rank, world, port, db_dir, shared=False):
    """DDP on a small model; the last rank loses SLOW_MS per step in an annotated section, so the
    others wait for it in their gradient all-reduce. Each rank records into rank<R>.db, or with
    `shared` every rank passes the same run.db (as a script launched per rank naturally does)."""
    import time
    init(rank, world, port)
    model = make_model().npu()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    xs, ys = data()
    with npuscope.profile(db=os.path.join(db_dir, "run.db" if shared else f"rank{rank}.db")) as prof:
        for step in range(CLUSTER_STEPS):
            x, y = xs[step % STEPS].npu(), ys[step % STEPS].npu()
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            if rank == world - 1:
                with torch.autograd.profiler.record_function("slow_rank_delay"):
                    time.sleep(SLOW_MS / 1000)
            loss.backward()
            opt.step()
            prof.step()
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_cluster_report_names_the_slow_rank_and_its_op(tmp_path, cli, world):
    import json
    import subprocess
    spawn(cluster_rank, world, str(tmp_path))
    # Every rank's run names the same job; the same collective has the same (grp, seq) everywhere.
    jobs, seqs = set(), []
    for rank in range(world):
        con = sqlite3.connect(tmp_path / f"rank{rank}.db")
        jobs |= {r[0] for r in con.execute("SELECT job FROM runs")}
        rows = con.execute("SELECT grp, seq, kind, bytes, start_ns, end_ns, step, op_id FROM collectives"
                           " ORDER BY seq").fetchall()
        ops = dict(con.execute("SELECT e.id, s.value FROM op_events e JOIN strings s ON s.id = e.name_id"))
        con.close()
        assert all(end is not None and end >= start for _, _, _, _, start, end, _, _ in rows)
        assert all(ops[op_id] == {"allreduce": "hcom_allReduce_", "broadcast": "hcom_broadcast_"}[kind]
                   for _, _, kind, *_, op_id in rows)
        # DDP's one bucket: the model's 8*16+16+16*3+3 fp32 parameters, all-reduced once per step
        # (and, after the first step, its rebuilt bucket order broadcast)
        reduces = [r for r in rows if r[2] == "allreduce"]
        assert [step for *_, step, _ in reduces] == list(range(CLUSTER_STEPS))
        assert {b for _, _, _, b, *_ in reduces} == {(8 * 16 + 16 + 16 * 3 + 3) * 4}
        seqs.append([(g, s, kind) for g, s, kind, *_ in rows])
    assert len(jobs) == 1 and None not in jobs, jobs
    assert all(s == seqs[0] for s in seqs)

    out = subprocess.run([cli, "report", "--cluster", str(tmp_path), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["job"] == jobs.pop() and [r["rank"] for r in rep["ranks"]] == list(range(world))
    slow = rep["slow_rank"]
    assert slow["found"] and slow["rank"] == world - 1 and slow["op"] == "slow_rank_delay", slow
    # it lost at least most of SLOW_MS in its worst step (more in step 0, where the ranks also
    # started apart), all of SLOW_MS in the annotated sleep
    assert slow["step_lost_ns"] > 0.8 * SLOW_MS * 1e6, slow
    assert slow["op_more_ns"] >= SLOW_MS * 1e6, slow
    for r in rep["ranks"]:
        assert len(r["steps"]) == CLUSTER_STEPS
        for s in r["steps"]:
            # the breakdown's identities
            assert s["communication_ns"] == s["overlapped_ns"] + s["communication_not_overlapped_ns"]
            assert s["stage_ns"] == s["computing_ns"] + s["communication_not_overlapped_ns"] + s["free_ns"]
            assert s["stage_ns"] <= s["step_ns"]
        assert [c["count"] for c in r["collectives"] if c["kind"] == "allreduce"] == [CLUSTER_STEPS]
        # the others wait for the slow rank in their all-reduce: most of SLOW_MS a step (from
        # step 1: in step 0 the ranks also differ by when each started; on a loaded machine a
        # rank's own work takes part of the wait)
        if r["rank"] != world - 1:
            waited = sum(s["communication_not_overlapped_ns"] for s in r["steps"] if s["step"] > 0)
            assert waited > 0.6 * SLOW_MS * 1e6 * (CLUSTER_STEPS - 1), (r["rank"], r["steps"])
    text = subprocess.run([cli, "report", "--cluster"] + [str(tmp_path / f"rank{k}.db") for k in range(world)],
                          capture_output=True, text=True)
    assert text.returncode == 0 and f"Slow rank: rank {world - 1}" in text.stdout and "slow_rank_delay" in text.stdout


def test_ranks_given_one_path_keep_their_recordings(tmp_path, cli):
    import json
    import subprocess
    spawn(cluster_rank, 2, str(tmp_path), True)
    assert sorted(os.listdir(tmp_path)) == ["run.db", "run.rank1.db"], os.listdir(tmp_path)
    for name, rank in (("run.db", 0), ("run.rank1.db", 1)):
        con = sqlite3.connect(tmp_path / name)
        assert con.execute("SELECT rank, world_size, status FROM runs").fetchall() == [(rank, 2, "completed")]
        assert con.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == CLUSTER_STEPS
        con.close()
    out = subprocess.run([cli, "report", "--cluster", str(tmp_path / "run.db"), "--json"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert [r["rank"] for r in rep["ranks"]] == [0, 1] and rep["slow_rank"]["rank"] == 1, rep["slow_rank"]


# ---- AMP across ranks ------------------------------------------------------------------------
def amp_rank(rank, world, port, out_dir):
    init(rank, world, port)
    from npuscope import amp
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).npu()
    # A fused optimizer on combined tensors (torch_npu's NpuFusedAdam): its updates must stay
    # bit-identical across ranks.
    opt = npuscope.optimizers.NpuFusedAdam(model.parameters(), lr=0.01)
    model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale="dynamic", dynamic_init_scale=2.0 ** 16,
                                verbosity=0)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    events = []
    for step in range(3):
        # Step 1 overflows on rank 0 only: its input is huge there (fp16 overflows in forward).
        x = torch.full((2, 4), 1e4 if (step == 1 and rank == 0) else 0.1).npu()
        before = [p.detach().cpu().clone() for p in model.parameters()]
        loss = ddp(x).float().pow(2).mean()
        opt.zero_grad()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
        changed = any(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))
        events.append((step, amp.loss_scale(), changed))
    params = [p.detach().cpu() for p in model.parameters()]
    masters = [p.detach().cpu() for p in amp.master_params(opt)]
    torch.save({"events": events, "params": params, "masters": masters}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def test_an_overflow_on_one_rank_skips_the_step_on_all(tmp_path):
    spawn(amp_rank, 2, str(tmp_path))
    d0, d1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    r0, r1 = d0["events"], d1["events"]
    assert r0 == r1, (r0, r1)
    assert [changed for _, _, changed in r0] == [True, False, True]  # step 1 skipped everywhere
    assert r0[1][1] == r0[0][1] / 2  # the scale backed off once, on both ranks
    # The fused optimizer's fp16 model and fp32 master weights: bit-identical on both ranks.
    for key in ("params", "masters"):
        assert len(d0[key]) == len(d1[key]) > 0
        for a, b in zip(d0[key], d1[key]):
            assert torch.equal(a, b), (key, a, b)
    assert {p.dtype for p in d0["masters"]} == {torch.float32}


# ---- SyncBatchNorm ---------------------------------------------------------------------------
def syncbn_rank(rank, world, port, out_dir):
    init(rank, world, port)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 3, 4, 4, generator=g) * 2 + 1
    w = torch.randn(8, 3, 4, 4, generator=g)
    per = 8 // world
    bn = npuscope.parallel.SyncBatchNorm(3).npu()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, -1.0, 0.3]))
    xs = x[rank * per:(rank + 1) * per].npu().requires_grad_()
    y = bn(xs)
    (y * w[rank * per:(rank + 1) * per].npu()).sum().backward()
    grads = torch.stack([bn.weight.grad, bn.bias.grad])
    dist.all_reduce(grads)  # local parameter gradients add up to the whole batch's
    torch.save({"y": y.detach().cpu(), "dx": xs.grad.cpu(), "grads": grads.cpu(),
                "running_mean": bn.running_mean.cpu(), "running_var": bn.running_var.cpu()},
               os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_sync_batchnorm_equals_batchnorm_on_the_whole_batch(tmp_path, world):
    spawn(syncbn_rank, world, str(tmp_path))
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(8, 3, 4, 4, generator=g) * 2 + 1).requires_grad_()
    w = torch.randn(8, 3, 4, 4, generator=g)
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, -1.0, 0.3]))
    y = bn(x)
    (y * w).sum().backward()
    per = 8 // world
    for rank in range(world):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        part = slice(rank * per, (rank + 1) * per)
        assert torch.allclose(got["y"], y.detach()[part], atol=1e-5)
        assert torch.allclose(got["dx"], x.grad[part], atol=1e-5)
        assert torch.allclose(got["grads"][0], bn.weight.grad, atol=1e-4)
        assert torch.allclose(got["grads"][1], bn.bias.grad, atol=1e-4)
        assert torch.allclose(got["running_mean"], bn.running_mean, atol=1e-6)
        assert torch.allclose(got["running_var"], bn.running_var, atol=1e-5)


# ---- a rank lost -----------------------------------------------------------------------------
def lost_rank(rank, world, port, db_dir):
    import signal
    import time
    init(rank, world, port)
    with npuscope.profile(db=os.path.join(db_dir, f"rank{rank}.db")) as prof:
        for step in range(200):
            t = torch.ones(1024).npu()
            dist.all_reduce(t)
            prof.step()
            if rank == 1 and step == 40:  # after 2 s and more: the writer has committed steps
                os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer or a crashed node would
            time.sleep(0.05)


def test_a_killed_rank_ends_its_peers_runs_failed_promptly(tmp_path):
    import time
    # Plain processes: torch.multiprocessing.spawn would terminate the survivor itself.
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=lost_rank, args=(rank, 2, port, str(tmp_path))) for rank in range(2)]
    start = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=90)
    elapsed = time.monotonic() - start
    assert procs[1].exitcode == -9
    assert procs[0].exitcode not in (None, 0), procs[0].exitcode  # the survivor fails on its own
    assert elapsed < 45, elapsed  # not c10d's 30-minute timeout, nor this test's 60 s one
    con = sqlite3.connect(tmp_path / "rank0.db")
    status = con.execute("SELECT status, results_json FROM runs").fetchone()
    con.close()
    assert status[0] == "failed", status
    assert "Connection" in status[1] or "peer" in status[1].lower(), status  # Gloo names the lost peer
    for rank in range(2):
        con = sqlite3.connect(tmp_path / f"rank{rank}.db")
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
        con.close()
        assert steps >= 10, (rank, steps)  # the steps committed a second before the kill are there


def test_data_parallel_is_refused_on_npu_modules():
    with pytest.raises(RuntimeError, match="DataParallel is not supported on the npu.*DistributedDataParallel"):
        torch.nn.DataParallel(torch.nn.Linear(2, 2).npu())
    torch.nn.DataParallel(torch.nn.Linear(2, 2))  # CPU modules: torch's behaviour, untouched
