"""The worker of ``test_gspo_distributed.py``: every distributed phase in one launch.

``torchrun --nproc_per_node=2 _dist_worker.py OUT`` runs, on each rank of one gloo process
group, the DDP phase (``_gspo_ddp_worker.run``), then the FSDP2 phase
(``_gspo_fsdp_worker.run``) and the FSDP2 checkpoint phase (``_fsdp_checkpoint_worker.run``),
and ends through ``finish``. ``python _dist_worker.py OUT --single`` then runs the one-process
references: the DDP phase on the whole batches, and the checkpoint phase, which loads the
ranks' checkpoint. With ``--no-fsdp`` (a torch without FSDP2) only the DDP phase runs.

One launch of three phases instead of three launches: each launch started three interpreters
that import torch (most of these tests' time).
"""

from __future__ import annotations

import sys
from pathlib import Path

import _gspo_ddp_worker as ddp  # type: ignore[import-not-found]
import torch.distributed as dist


def main(out: Path, *, single: bool, fsdp: bool) -> None:
    if not single:
        dist.init_process_group("gloo")
    ddp.run(out, single)
    if fsdp:
        import _fsdp_checkpoint_worker as checkpoint  # type: ignore[import-not-found]
        import _gspo_fsdp_worker as fsdp2  # type: ignore[import-not-found]

        if not single:
            fsdp2.run(out)
        checkpoint.run(out, single)
    if not single:
        ddp.finish()


if __name__ == "__main__":
    main(Path(sys.argv[1]), single="--single" in sys.argv[2:], fsdp="--no-fsdp" not in sys.argv[2:])
