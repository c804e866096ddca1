"""TRL as the engine for scale: operator prompts, sandbox rewards and our advantages in TRL.

TRL's ``GRPOTrainer`` with ``importance_sampling_level="sequence"`` is GSPO; with accelerate
(DeepSpeed ZeRO-3 or FSDP) and vLLM (server or colocate mode) it trains past one machine. This
module plugs openmle into it (extra ``trl``; tested with TRL 1.16.0):

- :func:`prompt_dataset`: a ``datasets.Dataset`` of operator prompts (conversational
  ``prompt`` column plus ``task``, ``operator`` and ``prompt_id``), built from
  :class:`~openmle.train.RolloutTask` s (the Draft request the rollout producer and the search
  send, :func:`openmle.operators.build_request`) and/or run directories (the request of every
  exported node, as :func:`openmle.search.export_sft` rebuilds it).
- :class:`SandboxReward`: a TRL reward function. TRL calls it once per generation batch with
  ``num_generations`` consecutive completions per prompt; it regroups them explicitly (and
  refuses a batch whose groups are split or mixed, naming the fix), runs every program in any
  :class:`~openmle.Sandbox` (the reward-hacking guard first), and turns each *whole* group into
  rewards with a :class:`~openmle.rewards.RewardProfile` (adaptive bounds need the group).
  Members the profile leaves out (``INFRA_ERROR``, unchecked) are returned as ``None``: TRL
  leaves them out of the group baseline and gives them advantage 0 (masked, not punished).
- :class:`OpenMLEGRPOTrainer`: ``GRPOTrainer`` whose advantages are the profile's (the entropic
  advantage by default, or ``"grpo"``), not TRL's ``(r - mean) / (std + 1e-4)``. The hook
  overrides ``_generate_and_score_completions`` and replaces the ``advantages`` it returns;
  TRL 1.16 has no public advantage hook, so this is a private extension point: tested with
  TRL 1.16.0 only, and the constructor refuses TRL versions outside ``>=1.0,<2``.
- :func:`sft_dataset`: the SFT export (parquet or JSONL) as a conversational
  prompt/completion dataset for TRL's ``SFTTrainer`` (loss on the answer only).

Limits: the reward function needs whole groups on one process, which TRL gives on a single
process; under several processes TRL spreads a group over ranks and the reward function raises
(the advantage replacement would need a gather; use TRL's own advantages there by passing
``SandboxReward(advantages="trl")``, whose rewards are still the profile's per group when
``per_device_train_batch_size * steps_per_generation`` is a multiple of ``num_generations``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from openmle._exports import publish_one
from openmle._protocols import Sandbox
from openmle._types import Job, Operator, Outcome, RunResult
from openmle._validation import check_choice, fail
from openmle.errors import InvalidArgument
from openmle.operators import parse_response
from openmle.rewards import GroupMember, GroupRewards, RewardGuard, RewardProfile, Verdict

from ._rollout import RolloutTask, _default_prompt

__all__ = ["SandboxReward", "prompt_dataset", "sft_dataset"]  # + OpenMLEGRPOTrainer (lazy)

TESTED_TRL = "1.16.0"


def _messages(req_messages: Iterable[Any]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in req_messages]


def prompt_dataset(
    tasks: Sequence[RolloutTask] = (),
    *,
    run_dirs: Iterable[str | Path] = (),
    repeat: int = 1,
) -> Any:
    """A ``datasets.Dataset`` of operator prompts for ``GRPOTrainer``.

    Args:
        tasks: one Draft prompt per task (the request the rollout producer sends).
        run_dirs: run directories; one prompt per node that :func:`openmle.search.export_sft`
            would export (its rebuilt request, the assistant answer dropped).
        repeat: rows per prompt (TRL samples ``num_generations`` completions per row).

    Returns:
        Columns ``prompt`` (chat messages), ``task``, ``operator``, ``prompt_id``.

    Raises:
        InvalidArgument: no prompt at all, or ``repeat`` < 1.
    """
    import datasets

    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise fail("an integer >= 1", "repeat", repeat)
    rows: list[dict[str, Any]] = []
    for t in tasks:
        req = _default_prompt(t, Operator.DRAFT, ())
        rows.append({"prompt": _messages(req.messages), "task": t.name, "operator": "draft"})
    dirs = list(run_dirs)
    if dirs:
        from openmle.search import evolutionary_records, parallel_records

        rows.extend(
            {"prompt": _messages(rec.messages[:-1]), "task": rec.task, "operator": rec.operator}
            for rec in [*parallel_records(dirs), *evolutionary_records(dirs)]
        )
    if not rows:
        raise fail("at least one task or run directory with exportable nodes", "tasks", tasks)
    out = []
    for i, r in enumerate(rows):
        out += [{**r, "prompt_id": f"p{i}"}] * repeat
    return datasets.Dataset.from_list(out)


def sft_dataset(path: str | Path) -> Any:
    """The SFT export (``.parquet`` or JSONL) as a conversational prompt/completion dataset.

    ``prompt`` is every message but the last, ``completion`` the assistant answer, so TRL's
    ``SFTTrainer`` trains on the answer only (its ``completion_only_loss``).

    Raises:
        InvalidArgument: the file is missing or has no ``messages`` column.
    """
    import datasets

    p = Path(path)
    if not p.is_file():
        raise fail("an SFT export written by openmle.search.export_sft", "path", str(p))
    if p.suffix == ".parquet":
        ds = datasets.Dataset.from_parquet(str(p))
        rows = [dict(r) for r in ds]
    else:
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    if not rows or any("messages" not in r or len(r["messages"]) < 2 for r in rows):
        raise fail("records with a 'messages' column (prompt then answer)", "path", str(p))
    return datasets.Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": m["role"], "content": m["content"]} for m in r["messages"][:-1]
                ],
                "completion": [{"role": "assistant", "content": r["messages"][-1]["content"]}],
                "task": r.get("task", ""),
            }
            for r in rows
        ]
    )


def _text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    return ""


class SandboxReward:
    """A TRL reward function: run each completion's program, reward each group with a profile.

    Args:
        sandbox: where programs run (any :class:`~openmle.Sandbox`).
        tasks: the tasks the ``task`` column names.
        num_generations: TRL's ``num_generations`` (the group size).
        profile: rewards and advantages (default :meth:`RewardProfile.default`).
        guard: checked before the sandbox (None: run everything); a rejected program is not
            executed and gets the hack penalty.
        parse: completion text -> program (default: :func:`openmle.operators.parse_response`).
        advantages: ``"profile"`` (:class:`OpenMLEGRPOTrainer` uses the profile's advantages)
            or ``"trl"`` (TRL normalises the returned rewards itself).

    Attributes:
        groups: the last call's groups: ``(task, members, history before, GroupRewards)``.
        advantages: the last call's advantages, one per completion (0 for masked members).
        history: per task, the raw validation scores seen so far (adaptive bounds).
    """

    __name__ = "openmle_sandbox_reward"  # TRL names reward functions by __name__

    def __init__(
        self,
        sandbox: Sandbox,
        tasks: Sequence[RolloutTask],
        *,
        num_generations: int,
        profile: RewardProfile | None = None,
        guard: RewardGuard | None = None,
        parse: Callable[[str], str | None] | None = None,
        advantages: str = "profile",
    ) -> None:
        if isinstance(num_generations, bool) or not isinstance(num_generations, int):
            raise fail("an integer >= 2", "num_generations", num_generations)
        if num_generations < 2:
            raise fail("an integer >= 2", "num_generations", num_generations)
        self.sandbox = sandbox
        self.tasks = {t.name: t for t in tasks}
        if not self.tasks:
            raise fail("at least one RolloutTask", "tasks", tasks)
        self.num_generations = num_generations
        self.profile = profile or RewardProfile.default()
        self.guard = guard if guard is not None else RewardGuard()
        self.parse = parse or (lambda text: parse_response(text).code)
        self.mode = check_choice(advantages, ("profile", "trl"), "advantages")
        self.history: dict[str, list[float]] = {n: [] for n in self.tasks}
        self.groups: list[tuple[str, tuple[GroupMember, ...], tuple[float, ...], GroupRewards]]
        self.groups = []
        self.advantages: list[float] = []

    def _check_groups(self, n: int, tasks: Sequence[Any], ids: Sequence[Any]) -> None:
        """Raise unless the ``n`` completions are whole groups of known tasks, in order."""
        g = self.num_generations
        if n % g:
            raise InvalidArgument(
                f"SandboxReward got {n} completions, not a multiple of num_generations={g}: TRL "
                "split a group across processes; run on one process or pass advantages='trl'"
            )
        for s in range(0, n, g):
            if len(set(ids[s : s + g])) != 1:
                raise InvalidArgument(
                    f"completions {s}..{s + g - 1} are not one group (prompt_ids "
                    f"{sorted(set(ids[s : s + g]))}): TRL's grouping differs from "
                    f"num_generations={g}; pass the trainer's num_generations"
                )
            if tasks[s] not in self.tasks:
                raise fail(f"one of {sorted(self.tasks)}", "task", tasks[s])

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kw: Any
    ) -> list[float | None]:
        """TRL's reward-function signature; see the class docstring."""
        g = self.num_generations
        n = len(completions)
        tasks, ids = kw.get("task"), kw.get("prompt_id")
        if tasks is None or ids is None:
            raise fail(
                "a dataset with 'task' and 'prompt_id' columns (prompt_dataset)", "task", None
            )
        self._check_groups(n, tasks, ids)
        codes = [self.parse(_text(c)) for c in completions]
        results: list[RunResult | None] = [None] * n
        verdicts: list[Any] = [None] * n

        async def one(i: int, code: str) -> None:
            spec = self.tasks[tasks[i]]
            verdicts[i] = v = await self.guard.check(code, task_description=spec.description)
            if v.verdict is Verdict.REJECTED:
                return
            job = Job(code=code, task=spec.name, timeout_s=spec.timeout_s,
                      resources=spec.resources, name=f"trl-{i}")  # fmt: skip
            results[i] = await self.sandbox.run(job)

        async def run_all() -> None:
            async with anyio.create_task_group() as tg:
                for i, code in enumerate(codes):
                    if code is not None:
                        tg.start_soon(one, i, code)

        anyio.run(run_all)
        rewards: list[float | None] = []
        self.groups, self.advantages = [], []
        for s in range(0, n, g):
            members = [_member(verdicts[i], results[i]) for i in range(s, s + g)]
            spec = self.tasks[tasks[s]]
            before = tuple(self.history[spec.name])
            gr = self.profile.group(
                members, meta=spec.meta, history=before, leaderboard=spec.leaderboard
            )
            self.history[spec.name].extend(gr.history_update)
            self.groups.append((spec.name, tuple(members), before, gr))
            for r, a, inc in zip(gr.rewards, gr.advantages, gr.included, strict=True):
                ok = inc and not gr.discarded
                rewards.append(r if ok else None)  # None: TRL masks it (NaN, advantage 0)
                self.advantages.append(a if ok else 0.0)
        return rewards


def _member(verdict: Any, result: RunResult | None) -> GroupMember:
    """One completion as a group member: rejected by the guard, no code, or its run."""
    if verdict is not None and verdict.verdict is Verdict.REJECTED:
        return GroupMember(
            outcome=Outcome.REJECTED, reason=",".join(verdict.reasons) or "reward_hacking"
        )
    if result is None:
        return GroupMember(outcome=Outcome.MISSING_CODE)
    return GroupMember.from_result(result, verdict)


def _trl_trainer_base() -> type:
    from openmle._compat import require

    trl = require("trl", "trl")
    major = int(trl.__version__.split(".")[0])
    if major != 1:
        raise InvalidArgument(
            f"OpenMLEGRPOTrainer is tested with TRL {TESTED_TRL} (>=1.0,<2); found "
            f"{trl.__version__}. Pin 'trl>=1.0,<2' or use SandboxReward(advantages='trl') with "
            "a plain GRPOTrainer"
        )
    base: type = getattr(trl, "GRPOTrainer")  # noqa: B009 (trl exports it lazily)
    return base


def _make_trainer_class() -> type:
    import torch

    base = _trl_trainer_base()

    class OpenMLEGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """``trl.GRPOTrainer`` whose advantages are the reward profile's (see the module).

        Takes ``GRPOTrainer``'s arguments; ``reward_funcs`` must include exactly one
        :class:`SandboxReward` with ``advantages="profile"`` (the advantage source).
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            sources = [
                f for f in self.reward_funcs if isinstance(f, SandboxReward) and f.mode == "profile"
            ]
            if len(sources) != 1:
                raise fail(
                    "exactly one SandboxReward(advantages='profile')", "reward_funcs", len(sources)
                )
            self.openmle_reward: SandboxReward = sources[0]
            if self.openmle_reward.num_generations != self.num_generations:
                raise fail(
                    f"num_generations={self.num_generations} (the trainer's)",
                    "SandboxReward.num_generations", self.openmle_reward.num_generations,
                )  # fmt: skip

        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            out: dict[str, Any] = super()._generate_and_score_completions(inputs)
            adv = torch.tensor(self.openmle_reward.advantages, dtype=torch.float32)
            n = out["advantages"].shape[0]
            rank = self.accelerator.process_index
            out["advantages"] = adv[rank * n : (rank + 1) * n].to(out["advantages"].device)
            return out

    return OpenMLEGRPOTrainer


def __getattr__(name: str) -> Any:
    if name == "OpenMLEGRPOTrainer":
        cls = _make_trainer_class()
        publish_one(cls, "openmle.train")
        globals()[name] = cls
        return cls
    raise AttributeError(name)
