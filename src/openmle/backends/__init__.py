"""Reference backends: leaf adapters for sandboxes and operator models.

The torch training stack (trainers, SFT, rollouts, the tiny causal LM) moved to
:mod:`openmle.train`; its names are still reachable here for one release, with a
``DeprecationWarning`` naming the new import.

Every backend lives in a private module and is imported only when first used, so
``import openmle.backends`` stays light; a backend whose optional dependency is missing raises
:class:`openmle.errors.MissingDependency` with the ``pip install`` line.

:func:`make_sandbox` and :func:`make_model` build a part from a spec string (``"local"``,
``"service:URL"``, ``"module:callable"``, a registered or entry-point name); every command
that takes ``--sandbox`` or ``--model`` goes through them.

The sandbox kit for backend authors: :class:`TaskHandle` (what a sandbox needs from a task) and
:class:`GradeLike` (a grade report), :class:`LogCap` (bounded head-and-tail log capture) and
:func:`classify_run` (how a program's ending becomes a :class:`~openmle.RunResult`, the same
rule every shipped sandbox uses).

The kit for the packages built on the backends (the job service, the task builder, the bench,
the CLI): the sandbox factory by spec, :func:`build_sandbox` (a spec and options, plus optional
keywords passed only where the factory takes them), :func:`sandbox_takes` and
:func:`check_sandbox_spec` (nothing built); the stale-run sweep, :func:`remove_stale_cgroups`
(the cgroups a killed process's sandboxes left), :func:`kill_stale_programs` (the programs
its runs left in a work directory), :func:`kill_own_programs` (the programs this process's
sandboxes started, for an owner that must exit at once), :func:`safe_rmtree` (remove a run
directory a program may have made hostile) and :func:`pid_alive` (whether a process of this
host still runs, a zombie counting as ended); for a container made outside a sandbox (the
bench's NatureBench grading container), :func:`managed_container_labels` (the labels by which
the stale-container sweep removes it once its owner is gone) and :func:`start_watchdog` (its
deadline, kept on the host); the GPUs of this host, :func:`visible_gpus` (those this process
may use, as a sandbox leases them) and :func:`gpu_models` (what ``nvidia-smi`` lists).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openmle._exports import publish_one, warn_deprecated

if TYPE_CHECKING:
    from openmle._runlog import LogCap as LogCap
    from openmle._runlog import classify_run as classify_run
    from openmle._task_protocol import GradeLike as GradeLike
    from openmle._task_protocol import TaskHandle as TaskHandle
    from openmle.backends._docker import DockerSandbox as DockerSandbox
    from openmle.backends._docker import managed_container_labels as managed_container_labels
    from openmle.backends._gpu import gpu_models as gpu_models
    from openmle.backends._gpu import visible_gpus as visible_gpus
    from openmle.backends._jobclient import JobServiceSandbox as JobServiceSandbox
    from openmle.backends._local import LocalSandbox as LocalSandbox
    from openmle.backends._offline import OfflineModel as OfflineModel
    from openmle.backends._openai import OpenAIModel as OpenAIModel
    from openmle.backends._ray import RaySandbox as RaySandbox
    from openmle.backends._registry import build_sandbox as build_sandbox
    from openmle.backends._registry import check_sandbox_spec as check_sandbox_spec
    from openmle.backends._registry import make_model as make_model
    from openmle.backends._registry import make_sandbox as make_sandbox
    from openmle.backends._registry import register_model as register_model
    from openmle.backends._registry import register_sandbox as register_sandbox
    from openmle.backends._registry import sandbox_takes as sandbox_takes
    from openmle.backends._replay import RecordingModel as RecordingModel
    from openmle.backends._replay import ReplayModel as ReplayModel
    from openmle.backends._stale import kill_own_programs as kill_own_programs
    from openmle.backends._stale import kill_stale_programs as kill_stale_programs
    from openmle.backends._stale import remove_stale_cgroups as remove_stale_cgroups
    from openmle.backends._stale import safe_rmtree as safe_rmtree
    from openmle.backends._watchdog import pid_alive as pid_alive
    from openmle.backends._watchdog import start_watchdog as start_watchdog

# name -> private module that defines it. Keep alphabetical.
_LAZY: dict[str, str] = {
    "DockerSandbox": "openmle.backends._docker",
    "GradeLike": "openmle._task_protocol",
    "JobServiceSandbox": "openmle.backends._jobclient",
    "LocalSandbox": "openmle.backends._local",
    "LogCap": "openmle._runlog",
    "OfflineModel": "openmle.backends._offline",
    "OpenAIModel": "openmle.backends._openai",
    "RaySandbox": "openmle.backends._ray",
    "RecordingModel": "openmle.backends._replay",
    "ReplayModel": "openmle.backends._replay",
    "TaskHandle": "openmle._task_protocol",
    "build_sandbox": "openmle.backends._registry",
    "check_sandbox_spec": "openmle.backends._registry",
    "classify_run": "openmle._runlog",
    "gpu_models": "openmle.backends._gpu",
    "kill_own_programs": "openmle.backends._stale",
    "kill_stale_programs": "openmle.backends._stale",
    "make_model": "openmle.backends._registry",
    "make_sandbox": "openmle.backends._registry",
    "managed_container_labels": "openmle.backends._docker",
    "pid_alive": "openmle.backends._watchdog",
    "register_model": "openmle.backends._registry",
    "register_sandbox": "openmle.backends._registry",
    "remove_stale_cgroups": "openmle.backends._stale",
    "safe_rmtree": "openmle.backends._stale",
    "sandbox_takes": "openmle.backends._registry",
    "start_watchdog": "openmle.backends._watchdog",
    "visible_gpus": "openmle.backends._gpu",
}
if list(_LAZY) != sorted(_LAZY):
    raise AssertionError("keep _LAZY alphabetical")

__all__ = sorted(_LAZY)


# Names that moved to openmle.train (deprecated aliases, removed in openmle 0.2.0).
_MOVED_TO_TRAIN: frozenset[str] = frozenset(
    {
        "AsyncRollouts",
        "ByteTokenizer",
        "Completion",
        "GSPOConfig",
        "GSPOLossOutput",
        "GSPOTrainer",
        "HFTokenizer",
        "LocalPolicy",
        "ModelPolicy",
        "Policy",
        "PolicySample",
        "RolloutBatch",
        "RolloutGroup",
        "RolloutProducer",
        "RolloutStep",
        "RolloutTask",
        "SFTBatch",
        "SFTConfig",
        "SFTTrainer",
        "TinyCausalLM",
        "TinyLMConfig",
        "Tokenizer",
        "encode_chat",
        "gspo_loss",
        "rollout_batch",
        "sample_completions",
        "sft_loss",
        "train_on_policy",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_TRAIN:
        warn_deprecated(
            f"openmle.backends.{name} (moved to openmle.train.{name})",
            f"import it as `from openmle.train import {name}`",
        )
        return getattr(importlib.import_module("openmle.train"), name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openmle.backends' has no attribute {name!r}")
    obj = publish_one(
        getattr(importlib.import_module(module), name), __name__, private=("openmle._",)
    )
    globals()[name] = obj
    return obj


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
