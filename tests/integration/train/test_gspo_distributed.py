"""GSPOTrainer under torch.distributed: 2 CPU ranks (gloo, torchrun) equal one process, under
DDP and under FSDP2 (``fully_shard``)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

import openmle  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.integration, pytest.mark.slow]

WORKER = Path(__file__).with_name("_dist_worker.py")
HAS_FSDP2 = importlib.util.find_spec("torch.distributed.fsdp") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(args: list[str], out: Path, *, single: bool = False) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(openmle.__file__).parents[1]),
        "OMP_NUM_THREADS": "1",
    }
    if sys.platform.startswith("linux"):
        # gloo otherwise resolves the host name, which sandboxed machines may not resolve
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    proc = subprocess.run(
        [*args, str(WORKER), str(out)]
        + (["--single"] if single else [])
        + ([] if HAS_FSDP2 else ["--no-fsdp"]),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _torchrun() -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
        "--master-addr=127.0.0.1", f"--master-port={_free_port()}", "--local-addr=127.0.0.1",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One launch of two ranks (the DDP, FSDP2 and checkpoint phases, ``_dist_worker.py``),
    then the one-process references (the DDP phase on the whole batches; the checkpoint phase
    on the ranks' checkpoint): their outputs in one directory, shared by the tests here (xdist
    group ``gspo_distributed``: on one worker)."""
    out = tmp_path_factory.mktemp("gspo-distributed")
    _run(_torchrun(), out)
    _run([sys.executable], out, single=True)
    return out


@pytest.mark.xdist_group("gspo_distributed")
def test_two_ranks_equal_one_process_on_the_whole_batch(runs: Path) -> None:
    """After two rollout batches (4 optimiser steps, accumulation of 1-sequence micro-batches),
    both DDP ranks hold the parameters one process gets on the whole batches; same for an SFT
    step."""
    single = torch.load(runs / "params-single.pt")
    initial = [p.detach() for p in _initial_model().parameters()]
    for rank in (0, 1):
        ranked = torch.load(runs / f"params-{rank}.pt")
        for a, b in zip(ranked, single, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    moved = max(float((a - b).abs().max()) for a, b in zip(single, initial, strict=True))
    assert moved > 1e-2  # the comparison is not vacuous: the parameters really moved
    sft_single = torch.load(runs / "sft-params-single.pt")
    for rank in (0, 1):
        sft_ranked = torch.load(runs / f"sft-params-{rank}.pt")
        for a, b in zip(sft_ranked, sft_single, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    names = sorted(p.name for p in (runs / "ck").iterdir())
    assert names == ["model.pt", "optimizer.pt", "rng-0.pt", "rng-1.pt", "trainer.json"]


@pytest.mark.xdist_group("gspo_distributed")
def test_fsdp2_two_ranks_equal_one_process_on_the_whole_batch(runs: Path) -> None:
    """The same steps on a model under FSDP2 (``fully_shard`` on the block and the root, gloo,
    2 CPU ranks): the gathered parameters equal one process on the whole batches (the trainer
    adds no DDP wrapper to an FSDP2 model; the model's own logits are used, not the chunked
    output layer, whose weight is sharded outside the forward)."""
    pytest.importorskip("torch.distributed.fsdp", reason="needs torch with FSDP2")
    single = torch.load(runs / "params-single.pt")
    sft_single = torch.load(runs / "sft-params-single.pt")
    initial = [p.detach() for p in _initial_model().parameters()]
    for rank in (0, 1):
        for name, want in (("fsdp-params", single), ("fsdp-sft-params", sft_single)):
            got = torch.load(runs / f"{name}-{rank}.pt")
            for a, b in zip(got, want, strict=True):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    moved = max(float((a - b).abs().max()) for a, b in zip(single, initial, strict=True))
    assert moved > 1e-2


def _initial_model() -> Any:
    from openmle.train import TinyCausalLM, TinyLMConfig

    return TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=0))


@pytest.mark.xdist_group("gspo_distributed")
def test_fsdp2_checkpoint_of_two_processes_loads_into_one_and_continues(runs: Path) -> None:
    """Two FSDP2 ranks take a step and save (full tensors gathered, optimiser state keyed by
    parameter name); one plain process loads that checkpoint and takes the next step on the
    whole batch: its loss and its parameters equal the two ranks' next step (1e-6)."""
    pytest.importorskip("torch.distributed.fsdp", reason="needs torch with FSDP2")
    import json

    info = json.loads((runs / "ck-fsdp" / "trainer.json").read_text())
    assert info["optimizer_keys"] == "fqn" and info["step"] == 2
    one = json.loads((runs / "fsdp-continue-single.json").read_text())
    single = torch.load(runs / "fsdp-continue-params-single.pt")
    initial = [p.detach() for p in _initial_model().parameters()]
    for rank in (0, 1):
        two = json.loads((runs / f"fsdp-continue-{rank}.json").read_text())
        assert one["step"] == two["step"] == 4
        for key in ("loss", "pg_loss", "grad_norm", "tokens"):
            assert one[key] == pytest.approx(two[key], rel=1e-6, abs=1e-7), key
        got = torch.load(runs / f"fsdp-continue-params-{rank}.pt")
        for a, b in zip(got, single, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert abs(one["loss"]) > 1e-4  # a real loss, not a vacuous zero
    moved = max(float((a - b).abs().max()) for a, b in zip(single, initial, strict=True))
    assert moved > 1e-2
