"""Named operating points: every setting a reproduction must hold, in one frozen value.

:data:`PAPER` is the Frontis-MA1 / OpenMLE paper's MLE-bench Lite operating point. Each field
says where its value comes from; a user override of any field is a *deviation*, listed by
:meth:`Preset.deviations` and recorded in the run's (bench's) manifest and report.

Selection weights: the paper's text gives 1.0/0.6/0.3 ("fixed without a sweep"), the released
experiment profile 1.0/0.4/0.25. The preset uses the released weights, the ones that produced
the paper's tables; ``ThreeFactorSelector.preset("paper")`` keeps the text's weights for
whoever wants them (then listed as a deviation).

GPU memory: the paper capped each job at 12 GB of a 24 GB card. The cap is recorded here and in
the manifest; see :attr:`Preset.gpu_memory_gb` for where it is and is not enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, final

import attrs
from attrs import field, frozen

from openmle.errors import InvalidArgument

__all__ = ["PAPER", "PRESETS", "Preset"]


def _frozen(value: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(sorted(dict(value).items())))


@final
@frozen(kw_only=True)
class Preset:
    """A named operating point of the search (and of a bench of searches).

    Args:
        name: the preset's name (``--preset NAME``).
        steps: steps per run (the budget's ``steps`` cap).
        sandbox_s: program run seconds per run (the budget's ``sandbox_s`` cap; the paper's
            "12 h" is this, not wall time).
        wall_s: wall seconds per run (the budget's ``wall_s`` cap).
        time_limit_s: the limit of one program run.
        seeds: runs per competition.
        max_debug_depth: Debug attempts per failed program (``SearchConfig.max_debug_depth``).
        selector: the three-factor weights by ``ThreeFactorSelector.preset`` name.
        prompt_chars: per-operator prompt caps in characters (``PromptBudget``); an operator
            not named keeps the default cap.
        budget_line: the prompt states the per-run limit and the steps, wall time and program
            run time left (always on in openmle; recorded for completeness).
        data_preview: a bounded data preview in the Draft prompt (benchmark tasks).
        validation: the validation protocol (``self``: the program holds out its own split;
            ``split``: the bench's validation view).
        gpu_memory_gb: the per-job GPU memory cap, recorded in the manifest. No openmle
            backend enforces it today: a cgroup or container cannot limit GPU memory; a hard
            per-process cap needs an NVIDIA MPS daemon (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``),
            which no backend starts, or the program itself calling
            ``torch.cuda.set_per_process_memory_fraction`` (see docs/how-to/run-mle-bench.md).
    """

    name: str
    steps: int
    sandbox_s: float
    wall_s: float
    time_limit_s: float
    seeds: int
    max_debug_depth: int
    selector: str
    prompt_chars: Mapping[str, int] = field(factory=dict, converter=_frozen, hash=False)
    budget_line: bool = True
    data_preview: bool = True
    validation: str = "split"
    gpu_memory_gb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        d = attrs.asdict(self, recurse=False)
        d["prompt_chars"] = dict(self.prompt_chars)
        return d

    def deviations(self, used: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Every field whose value in ``used`` differs from the preset's:
        ``{field: {"preset": value, "used": value}}`` (fields absent from ``used`` are taken
        as the preset's).

        Raises:
            InvalidArgument: ``used`` names a field the preset does not have.
        """
        mine = self.to_dict()
        unknown = sorted(set(used) - set(mine))
        if unknown:
            raise InvalidArgument(
                f"Expected preset fields {sorted(mine)} but got unknown {unknown}"
            )
        return {
            k: {"preset": mine[k], "used": _plain(v)}
            for k, v in sorted(used.items())
            if _plain(v) != mine[k]
        }

    @classmethod
    def named(cls, name: str) -> Preset:
        """The preset called ``name``.

        Raises:
            InvalidArgument: no such preset (the message lists them).
        """
        if name not in PRESETS:
            raise InvalidArgument(f"Expected --preset in {sorted(PRESETS)} but got {name!r}")
        return PRESETS[name]


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    return v


PAPER = Preset(
    name="paper",
    steps=800,
    sandbox_s=43_200.0,
    wall_s=64_800.0,
    time_limit_s=7_200.0,
    seeds=3,
    max_debug_depth=10,
    selector="released",
    prompt_chars={"improve": 54_300, "crossover": 78_400},
    budget_line=True,
    data_preview=True,
    # VALIDATION: the paper's protocol is "self" (the program holds out its own split).
    # This is the one place the preset sets it; `openmle bench run --preset paper` passes it
    # as --validation (openmle.bench.validation_protocol compares the bench's with it).
    validation="self",
    gpu_memory_gb=12.0,
)
"""The paper's MLE-bench Lite operating point: 800 steps, 43,200 sandbox seconds (12 h),
64,800 s wall (18 h), 7,200 s per program, 3 seeds, debug depth 10, the released selection
weights 1.0/0.4/0.25, prompt caps at the paper's p99 (Improve 54.3K, Crossover 78.4K
characters), the remaining-budget line, the data preview, validation protocol ``self`` and a
12 GB GPU memory cap per job."""

PRESETS: Mapping[str, Preset] = MappingProxyType({"paper": PAPER})
"""Every preset by name."""
