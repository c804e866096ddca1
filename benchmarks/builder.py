"""Corpus scale of the task builder: ``openmle task build-many`` over generated raw sources.

Generates ``--sources`` small raw folders (default 200) of every kind the builder reads: a
classification table, a regression table, free text, JSON records, two tables joined by a key,
image folders per class (grey PNGs written with zlib; building them needs Pillow, the ``data``
extra), a table with a date column (a time split), and a few that must not build (a name on
the shipped decontamination list, a folder with no table, a target with one value). Then runs
``openmle task build-many`` on them with the offline model and the local sandbox
(``--workers``, default 2: the two cores the figure is quoted for), and prints sources per
minute, the status counts, every rejected or failed source with its reason, and a final JSON
line.

Run: ``python benchmarks/builder.py`` (the full 200 sources take tens of minutes on two
cores); ``--sources 20 --no-solvability`` for a quick check.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit

KINDS = ("binary", "regression", "text", "json", "joined", "images", "time")
BAD_EVERY = 25
"""One source in this many is one that must not build (in turn: contaminated, no table,
one-valued target)."""


def _csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.write_text(
        "\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n",
        encoding="utf-8",
    )


def _table(root: Path, rng: random.Random, kind: str, n: int) -> None:
    rows = []
    for k in range(n):
        a, b, c = rng.gauss(0, 1), rng.gauss(0, 1), rng.choice(["x", "y", "z"])
        if kind == "binary":
            y: object = "yes" if a + 0.5 * b + rng.gauss(0, 0.7) > 0 else "no"
        else:
            y = round(3 * a - b + (c == "x") + rng.gauss(0, 0.5), 4)
        rows.append([k, round(a, 4), round(b, 4), c, y])
    _csv(root / "data.csv", ["id", "a", "b", "c", "target"], rows)


_POS = ["good", "great", "fine", "superb", "happy"]
_NEG = ["bad", "poor", "awful", "sad", "dull"]
_FILL = ["the", "item", "was", "really", "quite", "and", "it", "arrived"]


def _texts(rng: random.Random, n: int) -> list[dict[str, str]]:
    out = []
    for k in range(n):
        label = rng.choice(["pos", "neg"])
        words = [rng.choice(_FILL) for _ in range(7)]
        for _ in range(3):
            words.insert(rng.randrange(len(words)), rng.choice(_POS if label == "pos" else _NEG))
        if rng.random() < 0.12:  # a wrong label: no model is perfect
            label = "neg" if label == "pos" else "pos"
        out.append({"id": f"t{k}", "review": " ".join(words), "label": label})
    return out


def _joined(root: Path, rng: random.Random, n: int) -> None:
    customers: list[list[object]] = []
    orders: list[list[object]] = []
    for k in range(n):
        count = rng.randint(1, 6)
        for _ in range(count):
            orders.append([f"o{len(orders)}", f"c{k}", round(rng.uniform(5, 50), 2)])
        churn = int(count <= 2) if rng.random() > 0.15 else int(count > 2)
        customers.append([f"c{k}", rng.choice(["n", "s"]), churn])
    _csv(root / "customers.csv", ["customer_id", "region", "churn"], customers)
    _csv(root / "orders.csv", ["order_id", "customer_id", "amount"], orders)


def _png(path: Path, pixels: list[list[int]]) -> None:
    """An 8-bit grey PNG of ``pixels`` (rows of 0..255), written with zlib and struct."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _image_folders(root: Path, rng: random.Random, n: int) -> None:
    """train/<class>/*.png (12x12 grey noise, the top or the left half brighter; one image in
    ten of the other shape) and an unlabelled test/*.png: image folders per class without a
    labels table."""
    for k in range(n):
        label = rng.choice(["top", "left"])
        shape = label if rng.random() > 0.1 else {"top": "left", "left": "top"}[label]
        pixels = []
        for y in range(12):
            row = []
            for x in range(12):
                lift = 25 if (y < 6 if shape == "top" else x < 6) else 0
                row.append(max(0, min(255, int(rng.gauss(100 + lift, 60)))))
            pixels.append(row)
        folder = root / "train" / label
        folder.mkdir(parents=True, exist_ok=True)
        _png(folder / f"{k:04d}.png", pixels)
    (root / "test").mkdir()
    for k in range(5):
        _png(root / "test" / f"u{k}.png", [[rng.randrange(256)] * 12 for _ in range(12)])


def _timed(root: Path, rng: random.Random, n: int) -> None:
    """A table with an ISO date column (a time split: the latest rows are the test set)."""
    rows = []
    for k in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        day = f"2024-{1 + k * 12 // n:02d}-{1 + k % 28:02d}"
        rows.append([k, day, round(a, 4), round(b, 4), round(2 * a - b + rng.gauss(0, 0.5), 4)])
    _csv(root / "sales.csv", ["id", "date", "a", "b", "target"], rows)


def make_sources(root: Path, count: int, seed: int = 0) -> None:
    """``count`` raw folders under ``root`` (``s0000`` ...), kinds in turn, some bad."""
    rng = random.Random(seed)
    for k in range(count):
        d = root / f"s{k:04d}"
        d.mkdir(parents=True)
        n = rng.randint(80, 160)
        if k % BAD_EVERY == BAD_EVERY - 1:
            bad = (k // BAD_EVERY) % 3
            if bad == 0:  # a name on the shipped list: refused by decontamination
                d = d.rename(root / f"spooky-author-identification-{k}")
                _table(d, rng, "binary", n)
            elif bad == 1:  # no table at all
                (d / "notes.bin").write_bytes(bytes(range(256)))
            else:  # a one-valued target: no task
                _csv(d / "data.csv", ["id", "a", "label"], [[j, j % 7, "same"] for j in range(n)])
            continue
        kind = KINDS[k % len(KINDS)]
        if kind in ("binary", "regression"):
            _table(d, rng, kind, n)
        elif kind == "text":
            recs = _texts(rng, n)
            _csv(d / "reviews.csv", ["id", "review", "label"], [list(r.values()) for r in recs])
        elif kind == "json":
            (d / "reviews.json").write_text(json.dumps(_texts(rng, n)), encoding="utf-8")
        elif kind == "images":
            _image_folders(d, rng, n)
        elif kind == "time":
            _timed(d, rng, n)
        else:
            _joined(d, rng, n)


def main(argv: list[str] | None = None) -> int:
    """Generate the sources, build them all, print the rate and the reasons."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=200, help="raw sources (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="builds at once (default 2)")
    parser.add_argument("--no-solvability", action="store_true", help="skip the baselines (faster)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="openmle-bench-builder-"))
    try:
        sources, corpus = tmp / "sources", tmp / "corpus"
        make_sources(sources, args.sources)
        cmd = [
            sys.executable, "-m", "openmle", "task", "build-many", str(sources),
            "--out", str(corpus), "--workers", str(args.workers),
        ]  # fmt: skip
        if args.no_solvability:
            cmd.append("--no-solvability")
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        records = {
            p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((corpus / "records").glob("*.json"))
        }
        status = Counter(r["status"] for r in records.values())
        kinds: Counter[str] = Counter()
        splits: Counter[str] = Counter()
        for name in records:
            record = corpus / "tasks" / name / "builder" / "record.json"
            if record.is_file():
                spec = json.loads(record.read_text(encoding="utf-8"))["spec"]["spec"]
                kinds[spec.get("kind", "table")] += 1
                splits[(spec.get("split") or {}).get("kind", "random")] += 1
        rate = len(records) / (elapsed / 60.0) if elapsed > 0 else 0.0
        print(
            f"build-many exit {proc.returncode}; {len(records)} of {args.sources} sources in "
            f"{elapsed:.1f} s with {args.workers} workers: {rate:.1f} sources per minute"
        )
        print(
            f"built {status['built']}, rejected {status['rejected']}, failed "
            f"{status['failed']}; built kinds {dict(sorted(kinds.items()))}, splits "
            f"{dict(sorted(splits.items()))}"
        )
        not_built = {k: r for k, r in records.items() if r["status"] != "built"}
        for name, r in sorted(not_built.items()):
            print(f"  {r['status']:<8} {name}: {r['stage']}: {r['reason'][:160]}")
        if proc.returncode not in (0, 1):
            print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
        emit(
            "builder_corpus",
            {
                "sources": args.sources,
                "finished": len(records),
                "workers": args.workers,
                "solvability": not args.no_solvability,
                "seconds": round(elapsed, 1),
                "sources_per_minute": round(rate, 2),
                "built": status["built"],
                "rejected": status["rejected"],
                "failed": status["failed"],
                "built_kinds": dict(sorted(kinds.items())),
                "built_splits": dict(sorted(splits.items())),
                "not_built": {
                    k: f"{r['status']}: {r['stage']}: {r['reason'][:200]}"
                    for k, r in sorted(not_built.items())
                },
            },
        )
        return 0 if len(records) == args.sources else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
