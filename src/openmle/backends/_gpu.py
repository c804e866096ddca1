"""GPU leases for local runs: by count or by id, composed with an inherited CUDA_VISIBLE_DEVICES.

The pool's devices are the GPUs this process may use, in the order CUDA numbers them for it:
the entries of an inherited ``CUDA_VISIBLE_DEVICES`` (ids or UUIDs) when set, else the
indices ``nvidia-smi`` lists. ``Resources.gpu_ids`` are indices into that list, so a job asking
for GPU 1 under ``CUDA_VISIBLE_DEVICES=4,6`` gets physical device ``6``. A lease is released on
every path out of a run (success, failure, timeout, cancellation).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
from attrs import define, field

from openmle._types import Resources
from openmle.errors import InvalidArgument

__all__ = ["GpuPool", "gpu_models", "visible_gpus"]


def visible_gpus(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs this process may use, as the local and Docker sandboxes lease them.

    With ``CUDA_VISIBLE_DEVICES`` set: its entries (ids or UUIDs) up to the first empty or
    negative one, where CUDA stops reading (``"-1"`` hides every GPU, ``"0,-1,1"`` leaves
    ``"0"``). Otherwise the indices ``nvidia-smi`` lists; () where it is absent or fails.

    Args:
        environ: the environment to read (usually ``os.environ``).
    """
    inherited = environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None:
        out: list[str] = []
        for raw in inherited.split(","):
            item = raw.strip()
            if not item or item.startswith("-"):
                break  # CUDA stops at the first invalid entry ("-1" hides everything).
            out.append(item)
        return tuple(out)
    return _smi_lines("index")


def gpu_models() -> tuple[str, ...]:
    """One line per GPU ``nvidia-smi`` lists on this host: ``"NAME, MEMORY MiB"``, in its order.

    Empty where ``nvidia-smi`` is absent, fails (a driver that is not loaded prints its error
    on standard output) or takes longer than 30 s. Not narrowed by ``CUDA_VISIBLE_DEVICES``:
    :func:`visible_gpus` says which of them this process may use.
    """
    return _smi_lines("name,memory.total")


def _smi_lines(fields: str) -> tuple[str, ...]:
    """The non-empty lines of ``nvidia-smi --query-gpu=FIELDS`` (CSV, no header); () on failure."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        proc = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if proc.returncode != 0:
        return ()
    return tuple(line.strip() for line in proc.stdout.splitlines() if line.strip())


@define(eq=False)
class GpuPool:
    """Leases GPUs to jobs; a request waits while its GPUs are busy (no fairness guarantee).

    Args:
        devices: the physical device names (as ``CUDA_VISIBLE_DEVICES`` entries) in CUDA order.
    """

    devices: tuple[str, ...]
    _busy: set[int] = field(factory=set, init=False)
    _changed: anyio.Event | None = field(default=None, init=False)

    @classmethod
    def from_spec(
        cls, spec: int | Sequence[int] | None, environ: Mapping[str, str] | None = None
    ) -> GpuPool:
        """A pool from a ``LocalSandbox(gpus=...)`` value.

        Args:
            spec: None for every visible GPU, an int for the first ``n`` of them, or a
                sequence of indices into the visible GPUs.
            environ: where to read ``CUDA_VISIBLE_DEVICES`` (default ``os.environ``).

        Raises:
            InvalidArgument: more GPUs or an index beyond those visible.
        """
        visible = visible_gpus(os.environ if environ is None else environ)
        if spec is None:
            return cls(devices=visible)
        if isinstance(spec, bool) or not isinstance(spec, int | Sequence) or isinstance(spec, str):
            raise InvalidArgument(
                f"Expected None, an int or a sequence of GPU indices but got gpus={spec!r}"
            )
        if isinstance(spec, int):
            if spec < 0 or spec > len(visible):
                raise InvalidArgument(
                    f"Expected 0 <= gpus <= {len(visible)} (GPUs visible: {list(visible)}) "
                    f"but got gpus={spec}"
                )
            return cls(devices=visible[:spec])
        ids = list(spec)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(visible):
                raise InvalidArgument(
                    f"Expected GPU indices in [0, {len(visible)}) (visible: {list(visible)}) "
                    f"but got gpus={ids!r}"
                )
        if len(set(ids)) != len(ids):
            raise InvalidArgument(f"Expected distinct GPU indices but got gpus={ids!r}")
        return cls(devices=tuple(visible[i] for i in ids))

    def problem(self, resources: Resources) -> str | None:
        """Why ``resources`` can never be served by this pool, or None when it can."""
        if resources.gpu_ids is not None:
            bad = [i for i in resources.gpu_ids if i >= len(self.devices)]
            if bad:
                return (
                    f"Resources.gpu_ids={list(resources.gpu_ids)} names GPUs this sandbox does not "
                    f"have (it has {len(self.devices)}: {list(self.devices)}); "
                    f"use indices below {len(self.devices)}"
                )
            if len(set(resources.gpu_ids)) != len(resources.gpu_ids):
                return f"Resources.gpu_ids={list(resources.gpu_ids)} repeats a GPU"
        elif resources.gpus > len(self.devices):
            return (
                f"Resources.gpus={resources.gpus} exceeds the {len(self.devices)} GPU(s) this "
                f"sandbox may use ({list(self.devices)}); lower it or give the sandbox more GPUs"
            )
        return None

    @property
    def in_use(self) -> int:
        """How many GPUs are leased right now."""
        return len(self._busy)

    def _pick(self, resources: Resources) -> list[int] | None:
        if resources.gpu_ids is not None:
            wanted = list(resources.gpu_ids)
            return None if self._busy.intersection(wanted) else wanted
        free = [i for i in range(len(self.devices)) if i not in self._busy]
        return free[: resources.gpus] if len(free) >= resources.gpus else None

    @asynccontextmanager
    async def lease(self, resources: Resources) -> AsyncIterator[tuple[str, ...]]:
        """Hold the GPUs ``resources`` asks for; yields their physical names.

        Raises:
            InvalidArgument: the request can never be served (see :meth:`problem`).
        """
        why = self.problem(resources)
        if why is not None:
            raise InvalidArgument(why)
        if resources.gpu_count == 0:
            yield ()
            return
        while True:
            picked = self._pick(resources)
            if picked is not None:
                break
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
        self._busy.update(picked)
        try:
            yield tuple(self.devices[i] for i in picked)
        finally:
            self._busy.difference_update(picked)
            changed, self._changed = self._changed, None
            if changed is not None:
                changed.set()
