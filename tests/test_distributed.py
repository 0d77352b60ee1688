"""Data-parallel training on real torch.distributed process groups (gloo on 127.0.0.1).

Each test starts its own processes (a free port chosen at run time) and waits for them under a
time limit, so a hang fails the test instead of the session.  The one-process reference runs
the same trainer with the global batch; two runs differ only in the order the mean gradient
is summed, so they agree to a tolerance derived from float32 (``sqrt(eps)``: half its
digits, far above what a few steps of rounding can move and far below any wrong batch).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch.distributed")

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distributed_worker.py"
SRC = str(HERE.parent / "src")
TOL = float(np.sqrt(np.finfo(np.float32).eps))  # 3.5e-4
LIMIT = 240  # seconds for a whole group: generous on a loaded two-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(rank: int, world: int, port: int) -> dict[str, str]:
    return dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))


def launch(args: list[str], world: int, *, script: str | None = None) -> list[subprocess.Popen]:
    port = free_port()
    cmd = [sys.executable, "-c", script] if script else [sys.executable, str(WORKER)]
    return [subprocess.Popen([*cmd, *args], env=env_for(r, world, port),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(world)]


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a replica did not finish within {LIMIT} s")
        out.append((p.returncode, err))
    return out


def run_group(tmp_path, backend, optimizer, steps, world=2, batch=8) -> dict:
    out = tmp_path / f"group-{world}.npz"
    results = finish(launch([backend, optimizer, str(steps), str(out), str(batch)], world))
    for rc, err in results:
        assert rc == 0, err[-3000:]
    return dict(np.load(out))


def run_single(tmp_path, backend, optimizer, steps, batch) -> dict:
    out = tmp_path / "single.npz"
    subprocess.run([sys.executable, str(WORKER), backend, optimizer, str(steps), str(out),
                    str(batch), "--single"], check=True, timeout=LIMIT,
                   env=dict(os.environ, PYTHONPATH=SRC))
    return dict(np.load(out))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_two_replicas_follow_one_process_with_the_global_batch(tmp_path, backend, optimizer):
    steps = 14  # more than one epoch (96 rows / 16 a step = 6 steps an epoch)
    group = run_group(tmp_path, backend, optimizer, steps)
    single = run_single(tmp_path, backend, optimizer, steps, batch=16)
    np.testing.assert_allclose(group["losses"], single["losses"], rtol=TOL, atol=TOL)
    for name in ("w1", "b1", "w2"):
        np.testing.assert_allclose(group[name], single[name], rtol=TOL, atol=TOL)
    # a wrong split (each replica on the same rows) would follow another trajectory
    assert not np.allclose(group["losses"], run_single(tmp_path, backend, optimizer, steps,
                                                       batch=8)["losses"][:steps], atol=1e-3)


def test_small_buckets_overlapping_backward_follow_one_process(tmp_path):
    # 200-byte buckets: [w2, b1] goes out while w1's gradient is still computed, then w1; the
    # same trajectory as the global batch in one process
    out = tmp_path / "buckets.npz"
    results = finish(launch(["numpy", "adam", "8", str(out), "8", "--bucket-bytes", "200"], 2))
    for rc, err in results:
        assert rc == 0, err[-3000:]
    group = dict(np.load(out))
    single = run_single(tmp_path, "numpy", "adam", 8, batch=16)
    np.testing.assert_allclose(group["losses"], single["losses"], rtol=TOL, atol=TOL)
    for name in ("w1", "b1", "w2"):
        np.testing.assert_allclose(group[name], single[name], rtol=TOL, atol=TOL)
    params = 16 * 6 + 16 + 3 * 16
    assert int(group["sent"]) == 8 * 4 * (params + 1)  # more buckets, not more bytes


def test_buckets_close_at_the_limit_in_the_order_gradients_are_ready():
    from tensig.model.distributed import buckets

    # gradient 2 is ready first (after step 3), then 0 (step 5), then 1 (step 9)
    assert buckets([5, 9, 3], [40, 40, 40], 100) == [(9, [2, 0, 1])]
    assert buckets([5, 9, 3], [40, 40, 40], 80) == [(5, [2, 0]), (9, [1])]
    assert buckets([5, 9, 3], [400, 4, 4], 100) == [(5, [2, 0]), (9, [1])]
    assert buckets([], [], 100) == []


def test_each_bucket_goes_out_after_the_step_that_finishes_it():
    # plan the buckets of a real trainer: a bucket starts after the last step that writes any
    # of its gradients (never before: the all-reduce would send a partial sum), and with
    # small buckets the first one starts before backward ends (the overlap)
    from types import SimpleNamespace

    from tensig.model.fusion import Run

    sys.path.insert(0, str(HERE))
    import distributed_worker

    tr = distributed_worker.trainer("numpy", "sgd", 8, distributed=False)
    writes = [{a.lhs.key for a in (item.assigns if isinstance(item, Run) else [item])}
              for item in tr._gradients.items]
    assert len(writes) == len(tr._gradients.steps)
    grads = {p.grad.key for p in tr.opt.params}
    for limit, count in ((2**20, 1), (1, 3)):
        launch = tr._plan_buckets(SimpleNamespace(bucket_bytes=limit))
        planned = [k for step in sorted(launch) for bucket in launch[step] for k in bucket]
        assert sorted(planned, key=str) == sorted(grads, key=str)  # each gradient once
        assert sum(len(b) for b in launch.values()) == count
        for step, bs in launch.items():
            for bucket in bs:
                for k in bucket:  # final when the bucket goes out
                    assert not any(k in w for w in writes[step + 1:]), (step, k)
                assert any(k in writes[step] for k in bucket)  # and not one step later
    assert min(tr._plan_buckets(SimpleNamespace(bucket_bytes=1))) < len(writes) - 1


def test_bytes_on_the_wire_are_the_gradients(tmp_path):
    group = run_group(tmp_path, "numpy", "sgd", 3)
    params = 16 * 6 + 16 + 3 * 16  # w1, b1, w2 (float32) plus the loss, per step
    assert int(group["sent"]) == 3 * 4 * (params + 1)


def test_resume_on_another_number_of_processes(tmp_path):
    # 2 replicas x 8 rows save at step 5; one process with 16 rows resumes to step 12: the same
    # run as one process all along (the batch order is a function of the seed and the step)
    ckpt = tmp_path / "ckpt.safetensors"
    out = tmp_path / "first.npz"
    results = finish(launch(["numpy", "adam", "5", str(out), "8", "--save-at", "5",
                             str(ckpt)], 2))
    assert all(rc == 0 for rc, _ in results), results
    resumed = tmp_path / "resumed.npz"
    subprocess.run([sys.executable, str(WORKER), "numpy", "adam", "12", str(resumed), "16",
                    "--single", "--resume", str(ckpt)], check=True, timeout=LIMIT,
                   env=dict(os.environ, PYTHONPATH=SRC))
    whole = run_single(tmp_path, "numpy", "adam", 12, batch=16)
    got = dict(np.load(resumed))
    np.testing.assert_allclose(got["losses"], whole["losses"][5:], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(got["w1"], whole["w1"], rtol=TOL, atol=TOL)


DYING = textwrap.dedent("""
    import os, sys
    sys.argv = ["w", "numpy", "sgd", "1000", os.devnull, "8"]
    sys.path.insert(0, {here!r})
    import distributed_worker as w
    import tensig.model.train as train
    step = train.Trainer.step
    def dying(self, rows):
        if self.replicas.rank == 1 and self.step_count == 3:
            os._exit(17)  # the process vanishes mid-run
        return step(self, rows)
    train.Trainer.step = dying
    w.main(sys.argv[1:])
""")


def test_a_dying_replica_fails_the_others_with_a_clear_error():
    procs = launch([], 2, script=DYING.format(here=str(HERE)))
    (rc0, err0), (rc1, _) = finish(procs)
    assert rc1 == 17
    assert rc0 != 0 and "ReplicaError" in err0 and "step 3" in err0, err0[-2000:]


DIFFERENT = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {here!r})
    import distributed_worker as w
    if os.environ["RANK"] == "1":
        w.HIDDEN = 12  # this replica builds another model
    w.main(["numpy", "sgd", "2", os.devnull, "8"])
""")


def test_replicas_with_different_models_are_refused_at_start():
    (rc0, err0), (rc1, err1) = finish(launch([], 2, script=DIFFERENT.format(here=str(HERE))))
    assert rc0 != 0 and rc1 != 0
    for err in (err0, err1):
        assert "ReplicaError" in err and "w1" in err and "(12, 6)" in err and "(16, 6)" in err, \
            err[-2000:]


def test_without_a_process_group_the_error_says_how_to_launch():
    from tensig.model.distributed import ReplicaError, Replicas

    env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
           if k in os.environ}
    try:
        with pytest.raises(ReplicaError, match="torchrun"):
            Replicas()
    finally:
        os.environ.update(env)




def test_the_moons_demo_runs_under_torchrun_and_only_rank_0_speaks():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", "-m", "tensig.demos.moons", "--distributed", "--epochs", "2"]
    env = {k: v for k, v in env_for(0, 2, 0).items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("data-parallel: 2 replicas x 40 rows = global batch 80") == 1, out
    assert out.count("parameters (shapes inferred from use)") == 1, out
    assert out.count("held-out accuracy") == 1, out


def test_a_demo_process_knows_its_place(monkeypatch, capsys):
    from tensig.demos.common import place

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert place(False, "cuda") == place(False, "cuda")
    alone, replica = place(False, "cuda"), place(True, "cuda")
    assert (alone.rank, alone.device, alone.root) == (0, "cuda", True)
    assert (replica.rank, replica.device, replica.root) == (1, "cuda:1", False)
    replica.say("not on rank 1")
    alone.say("on rank 0")
    assert capsys.readouterr().out == "on rank 0\n"
