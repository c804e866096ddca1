"""The run directory: an append-only, fsync'd journal plus everything needed to resume.

Layout::

    RUN_DIR/
      manifest.json        what ran: versions, task, model, sandbox, budget, config, seeds,
                           prompt template hash, package versions, hardware
      journal.jsonl        one JSON object per line, appended and fsync'd in the order the
                           search core saw them: {"event": "proposal" | "node" | "cancel" | "final"}
      journal.seal         keyed runs only: the number of journal lines and the last one's chain
                           value under their own HMAC, rewritten atomically after each batch
      sessions.jsonl       start/resume/end of each process working on the run (timestamps;
                           start and resume record the session's budget, the one in force)
      writer.lock          "PID HOST" of the process driving the run, which holds an exclusive
                           flock on it while it writes: a second driver is refused (so
                           is a lock file that is a link: a run directory from elsewhere)
      board.json           the search board (best node, families, errors, lineage), rewritten
                           at most once a second and at the end
      nodes/<id>/program.py, nodes/<id>/logs.txt
      requests/<sha256>.json.gz
                           the exact request the model saw for a node (messages, operator,
                           sampling settings, metadata) as canonical JSON, gzip'd, named by the
                           SHA-256 of the uncompressed JSON and written once per distinct
                           request; the journal's node record names it in ``"request"``
                           (null when the step sent no request)
      final/program.py, final/test_logs.txt

Resume replays ``journal.jsonl`` into a fresh :class:`~openmle.search.SearchCore`: proposals
restore the generator state recorded after them, nodes are re-applied, and proposals without a
node or a cancel (work in flight when the process died) are re-queued with the same id,
operator, parents and seed. A torn last line (the process died mid-write) is truncated. Nothing
is lost and nothing is run twice into the journal.

Integrity: every journal line carries ``"chain"``, a SHA-256 over the previous line's chain value
and the line's own content (:data:`CHAIN_KEY`). Reading a run (resume, report, export) verifies
the chain and refuses a directory whose journal was edited, reordered or had lines inserted or
removed before its last line (:class:`~openmle.errors.RunDirError` naming the line). The chain
detects edits made without recomputing it (an edited score, a forged ``final`` record); it is not
a signature: someone who recomputes every hash can still forge a journal. With a journal key
(:data:`JOURNAL_KEY_ENV`) the chain is an HMAC and ``journal.seal`` names the journal's head,
so lines removed from its end are refused too. Runs written before the
chain (manifest ``schema_version`` 1) are still read, marked ``integrity == "unchained"``. Scores
must be finite (a ``NaN`` or ``Infinity`` anywhere in the journal is an error), a malformed record
is a :class:`~openmle.errors.RunDirError` naming its line, and a run directory whose manifest is
present but whose journal is missing is refused rather than restarted.

Recorded requests (``requests/``) are untrusted on read: the name must be 64 hex digits, the
blob decompresses to at most :data:`REQUEST_MAX_BYTES` and must hash to its name, else
:meth:`RunDir.request` raises :class:`~openmle.errors.RunDirError` naming the file. A blob is
written (atomically, fsync'd) in the writer's queue before the node line that names it, so a
journalled hash always has its blob unless the directory was altered; a step killed before its
node line leaves at most an unreferenced blob, and its re-run (same proposal) writes the request
it actually sends.

Departures from the released system (reference 5.12): one append-only journal instead of a
checkpoint rewritten after each commit, no orphan step directories to archive, and no id gaps.
Timestamps and wall seconds live in ``sessions.jsonl`` and in fields listed in
:data:`VOLATILE_KEYS`, so two runs of a deterministic search compare equal with
:func:`journal_fingerprint`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import hmac
import importlib.metadata
import inspect
import json
import logging
import math
import os
import platform
import re
import socket
import stat
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, final

import anyio
from attrs import define, field, frozen

from openmle._protocols import OperatorModel, Sandbox, Selector
from openmle._readback import open_back, read_back, read_back_json, read_back_text
from openmle._trees import remove_tree
from openmle._types import Message, ModelRequest, Operator, RunResult, TaskMeta
from openmle._version import __version__
from openmle._writeback import append_file, ensure_dir, open_append, write_file
from openmle.errors import InvalidArgument, OpenMLEError, RunDirError
from openmle.search._board import Board
from openmle.search._budget import Budget
from openmle.search._loop import Node, Proposal, SearchConfig, SearchCore
from openmle.search._routing import OperatorRouter, describe_routes

__all__ = [
    "CHAIN_KEY",
    "REQUEST_MAX_BYTES",
    "VOLATILE_KEYS",
    "RunDir",
    "check_new_run_dir",
    "journal_fingerprint",
    "read_journal",
]

log = logging.getLogger(__name__)

JOURNAL = "journal.jsonl"
MANIFEST = "manifest.json"
SESSIONS = "sessions.jsonl"
BOARD = "board.json"
REQUESTS = "requests"
SEAL = "journal.seal"
WRITER_LOCK = "writer.lock"
"""The file a driver holds an exclusive ``flock`` on while it writes the run (see
:func:`_claim_writer`); it names the holder (``PID HOST``) for the message another driver
gets."""
_HOLDER = re.compile(r"^[0-9]{1,10} [A-Za-z0-9._-]{1,64}$")
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})

MANIFEST_MAX_BYTES = 16 * 1024 * 1024
"""The largest ``manifest.json`` read back (a larger one, or one that is not a regular file,
is refused; see :func:`openmle._readback.read_back`)."""
JOURNAL_MAX_BYTES = 1024 * 1024 * 1024
"""The largest ``journal.jsonl`` read back."""
SESSIONS_MAX_BYTES = 64 * 1024 * 1024
"""The largest ``sessions.jsonl`` read back (a larger one reads as no sessions)."""
REQUEST_MAX_BYTES = 64 * 1024 * 1024
"""The most bytes a recorded request may decompress to (a larger blob is refused on read)."""

_SHA256 = re.compile(r"[0-9a-f]{64}")

BOARD_INTERVAL_S = 1.0
"""``board.json`` is a snapshot (the journal is the record): rewritten at most this often, and
when the run directory is closed."""

CHAIN_KEY = "chain"
"""The journal key holding the hash chain: ``sha256(previous chain value + "\\n" + the line
without this key)`` in hex; the first line chains from the empty string."""

SCHEMA_VERSION = 2
"""Run-directory schema: 2 adds the journal hash chain (1: no chain, still readable); a run
written with a journal key is schema :data:`KEYED_SCHEMA_VERSION`."""
KEYED_SCHEMA_VERSION = 4
"""Run-directory schema of a run written with a journal key: the chain is an HMAC-SHA256 keyed
with the user's key and seeded with the manifest (see :data:`JOURNAL_KEY_ENV`), and the
journal's head is sealed (``journal.seal``, required from schema 4 on; schema 3, keyed without
a seal, is still read)."""
_FIRST_KEYED_SCHEMA = 3
JOURNAL_KEY_ENV = "OPENMLE_JOURNAL_KEY"
"""Environment variable holding the journal key (at least 16 characters). Kept outside the run
directory, it turns the chain into a keyed MAC: a run written with it is refused unless the
same key is set when it is read, and while it is set an unkeyed run is refused (a keyed run
cannot be downgraded by rewriting its manifest). After each batch of journal lines a keyed run
also writes ``journal.seal``: the number of lines and the chain value of the last one, under
their own HMAC, so lines removed from the end of the journal are refused too (lines after the
sealed head, written by a process killed before it resealed, are accepted: they chain). Without
a key anyone can rewrite the whole directory, chain included, so unkeyed runs have no seal."""
JOURNAL_KEY_FILE_ENV = "OPENMLE_JOURNAL_KEY_FILE"
"""Environment variable naming a file that holds the journal key (used when
:data:`JOURNAL_KEY_ENV` is unset)."""
_MIN_KEY_BYTES = 16
_KEY_FILE_MAX_BYTES = 4096
SEAL_MAX_BYTES = 4096
"""The largest ``journal.seal`` read back (a larger one, or one that is not a regular file, is
refused)."""
_SEAL_DOMAIN = b"openmle journal seal\n"

VOLATILE_KEYS = frozenset({"model_s", "wall_s", "queue_s", "elapsed_s", "latency_s"})
"""Fields that hold wall-clock measurements; :func:`journal_fingerprint` drops them."""

_PACKAGES = ("numpy", "attrs", "anyio", "httpx", "scipy", "scikit-learn", "pyarrow", "pandas")


def _json_line(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode()


def _chain(prev: str, record: Mapping[str, Any], key: bytes | None = None) -> str:
    """The chain value of ``record`` (without its own chain key) after ``prev``: SHA-256, or
    HMAC-SHA256 with ``key``.
    """
    body = {k: v for k, v in record.items() if k != CHAIN_KEY}
    data = prev.encode() + b"\n" + _json_line(body)
    if key is not None:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


@frozen
class _Link:
    """How a journal's lines chain: unkeyed SHA-256 from ``""``, or HMAC-SHA256 with ``key``
    from ``start`` (the manifest's MAC, so the manifest is covered too).
    """

    key: bytes | None = None
    start: str = ""
    sealed: bool = False
    """Whether the run must carry a ``journal.seal`` (keyed, schema 4 and later)."""

    def next(self, prev: str, record: Mapping[str, Any]) -> str:
        return _chain(prev, record, self.key)

    def seal_mac(self, lines: int, chain: str) -> str:
        """The seal's HMAC over the run (``start``), the line count and the head's chain value,
        under its own domain (no chain value of the journal can stand in for it).
        """
        if self.key is None:
            raise AssertionError("internal invariant broken: an unkeyed chain has no seal")
        data = _SEAL_DOMAIN + f"{self.start}\n{lines}\n{chain}".encode()
        return hmac.new(self.key, data, hashlib.sha256).hexdigest()

    def seal(self, lines: int, chain: str) -> bytes:
        """The ``journal.seal`` naming line ``lines`` (chain value ``chain``) as the head."""
        mac = self.seal_mac(lines, chain)
        return _json_line({"lines": lines, "chain": chain, "mac": mac})


def journal_key() -> bytes | None:
    """The journal key from :data:`JOURNAL_KEY_ENV` or the file :data:`JOURNAL_KEY_FILE_ENV`
    names (None when neither is set).

    Raises:
        InvalidArgument: the key is shorter than 16 bytes, or the file cannot be read.
    """
    text = os.environ.get(JOURNAL_KEY_ENV)
    where = f"${JOURNAL_KEY_ENV}"
    if not text:
        path = os.environ.get(JOURNAL_KEY_FILE_ENV)
        if not path:
            return None
        where = f"${JOURNAL_KEY_FILE_ENV} ({path})"
        try:
            text = read_back_text(
                Path(path).expanduser(), max_bytes=_KEY_FILE_MAX_BYTES, errors="strict"
            ).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{where}: cannot read the journal key ({exc})") from None
    key = text.encode()
    if len(key) < _MIN_KEY_BYTES:
        raise InvalidArgument(
            f"{where}: the journal key has {len(key)} bytes; use at least {_MIN_KEY_BYTES} "
            "random bytes (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return key


def _key_id(key: bytes) -> str:
    """A public name of ``key`` (it reveals nothing of the key)."""
    return hmac.new(key, b"openmle journal key id", hashlib.sha256).hexdigest()[:16]


def _manifest_mac(key: bytes, manifest: Mapping[str, Any]) -> str:
    """The keyed chain's start: an HMAC of the manifest without its ``journal`` entry."""
    body = {k: v for k, v in manifest.items() if k != "journal"}
    return hmac.new(key, b"manifest\n" + _json_line(body), hashlib.sha256).hexdigest()


_MANIFEST_OBJECTS = ("model", "sandbox", "selector", "prompts", "budget", "config", "extra")
"""Manifest entries that, when present, are JSON objects (the report and resume read into them)."""


def _check_manifest(manifest: Mapping[str, Any], where: Path) -> None:
    """Raise :class:`RunDirError` unless the manifest's entries have the types readers use."""

    def bad(entry: str, kind: str) -> RunDirError:
        return RunDirError(
            f"{where}: {entry} is not {kind}; the manifest was altered (restore it from the "
            "run's original copy)"
        )

    task = manifest["task"]
    if not isinstance(task.get("name"), str):
        raise bad("task.name", "a string")
    if not isinstance(task.get("higher_is_better"), bool):
        raise bad("task.higher_is_better", "true or false")
    for key in _MANIFEST_OBJECTS:
        if key in manifest and not isinstance(manifest[key], dict):
            raise bad(key, "an object")
    cli = manifest.get("extra", {}).get("cli")
    if cli is not None and not isinstance(cli, dict):
        raise bad("extra.cli", "an object")
    workers = manifest.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise bad("workers", "an integer >= 1")
    if not isinstance(manifest.get("ordered", False), bool):
        raise bad("ordered", "true or false")


def _schema(manifest: Mapping[str, Any], where: Path) -> int:
    version = manifest.get("schema_version", 1)
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not 1 <= version <= KEYED_SCHEMA_VERSION
    ):
        raise RunDirError(
            f"{where}: schema_version {str(version)[:40]!r} is not one this openmle reads "
            f"(1 to {KEYED_SCHEMA_VERSION}); upgrade openmle or restore the manifest"
        )
    return version


def _link_for(manifest: Mapping[str, Any], run: Path) -> _Link | None:
    """The chain a run directory's journal must carry (None: a schema 1 run, unchained).

    Raises:
        RunDirError: a keyed run without the key (or with another key); a journal key is set
            but the run is not keyed (a downgrade, or a run written without the key); a schema
            1 manifest holding what only later writers record (``model.spec``,
            ``sandbox.spec``).
    """
    version = _schema(manifest, run / MANIFEST)
    key = journal_key()
    if version >= _FIRST_KEYED_SCHEMA:
        journal = manifest.get("journal")
        key_id = journal.get("key_id") if isinstance(journal, dict) else None
        if key is None:
            raise RunDirError(
                f"{run} was written with a journal key: set ${JOURNAL_KEY_ENV} (or "
                f"${JOURNAL_KEY_FILE_ENV}) to the same key to verify and read it"
            )
        if key_id != _key_id(key):
            raise RunDirError(
                f"{run} was written with another journal key (key id {str(key_id)[:40]!r}, "
                f"yours is {_key_id(key)!r}); set the key the run was written with"
            )
        start = _manifest_mac(key, manifest)
        return _Link(key=key, start=start, sealed=version >= KEYED_SCHEMA_VERSION)
    if key is not None:
        raise RunDirError(
            f"{run} has no keyed journal (schema {version}) but a journal key is set: a keyed "
            "run whose manifest was rewritten (a downgrade) reads the same, so it is refused; "
            f"unset ${JOURNAL_KEY_ENV} to read it as an unkeyed run (edits to it are then "
            "caught only when made by accident)"
        )
    if version >= 2:
        return _Link()
    later = [
        f"{part}.spec"
        for part in ("model", "sandbox")
        if isinstance(manifest.get(part), dict) and "spec" in manifest[part]
    ]
    if later:
        raise RunDirError(
            f"{run / MANIFEST}: says schema 1 (no hash chain) but records {later[0]}, which "
            "only schema 2 and later write: the run was downgraded to drop its chain; it "
            "cannot be trusted"
        )
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refused when it overflows (``1e999`` parses as infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _manifest_link(journal: Path) -> _Link | bool | None:
    """The chain the manifest next to ``journal`` asks for (False: no readable manifest)."""
    try:
        manifest = read_back_json(journal.parent / MANIFEST, max_bytes=MANIFEST_MAX_BYTES)
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict):
        return False
    return _link_for(manifest, journal.parent)


def _package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _hardware() -> dict[str, Any]:
    mem = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
    }


def _describe(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _spec_of(part: object) -> str | None:
    """The spec string ``openmle.backends.make_sandbox``/``make_model`` built ``part`` from
    (None when they did not: then ``openmle resume`` asks for ``--sandbox``/``--model``).
    """
    registry = sys.modules.get("openmle.backends._registry")  # not imported: nothing built
    return None if registry is None else registry.spec_of(part)


def _model_entry(model: object) -> dict[str, Any]:
    """The manifest's record of a model: id, class, spec, and ``routes`` (see
    :func:`_routes_entry`).
    """
    return {
        "id": str(getattr(model, "model", "") or getattr(model, "model_id", "")),
        "class": _describe(model),
        "spec": _spec_of(model),
        "routes": _routes_entry(model),
    }


def _routes_entry(model: object) -> dict[str, Any] | None:
    """For an :class:`OperatorRouter` (or a recorder around one): route name to the record of
    its model; None for one model.
    """
    router = model if isinstance(model, OperatorRouter) else getattr(model, "inner", None)
    return describe_routes(router, _model_entry) if isinstance(router, OperatorRouter) else None


def _summary_model(prompts: object) -> object | None:
    """The model that writes node summaries (``prompts.summaries.model``), if any."""
    return getattr(getattr(prompts, "summaries", None), "model", None)


def _template_hash(prompts: object) -> str:
    hook = getattr(prompts, "template_hash", None)
    if callable(hook):
        return str(hook())
    try:
        source = inspect.getsource(type(prompts))
    except (OSError, TypeError):
        source = repr(prompts)
    return hashlib.sha256(source.encode()).hexdigest()[:16]


_SHAPES: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "proposal": (("proposal", dict), ("rng", dict)),
    "node": (("node", dict),),
    "cancel": (("step", int),),
    "final": (("node_id", str), ("result", dict)),
}
"""The entries each journal event must carry (checked on every read)."""


def read_journal(
    path: str | Path, *, repair: bool = False, chained: bool | None = None
) -> list[dict[str, Any]]:
    """The records of a journal file, in order, with their hash chain verified.

    Args:
        path: the journal (or its run directory).
        repair: truncate a torn last line (a process killed mid-write) instead of ignoring it.
        chained: require the hash chain (True), accept a journal without one (False), or decide
            from the manifest next to the journal (None; without a manifest: verify the chain
            when the first record carries one).

    Raises:
        RunDirError: a line other than the last is not a JSON object with an ``"event"``,
            holds a non-finite number, or breaks the hash chain.
    """
    return [rec for _, rec in _read_lines(path, repair=repair, chained=chained)]


def _check_shape(rec: object, p: Path, lineno: int) -> None:
    """Raise :class:`RunDirError` unless ``rec`` is a known event with its typed entries."""
    if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
        raise RunDirError(
            f"{p}: line {lineno} is not a journal record (a JSON object with an "
            '"event"); the journal is damaged'
        )
    shape = _SHAPES.get(rec["event"])
    if shape is None:
        raise RunDirError(f"{p}: line {lineno} has unknown event {rec['event']!r}")
    for key, kind in shape:
        value = rec.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise RunDirError(
                f"{p}: line {lineno} is a {rec['event']!r} record without a valid "
                f"{key!r} entry; the journal is damaged"
            )


def _check_chain(
    rec: dict[str, Any], prev: str, *, link: _Link | None, path: Path, lineno: int
) -> str:
    """The chain value after ``rec`` (``prev`` when unchained); raises on a broken chain."""
    if link is not None:
        expected = link.next(prev, rec)
        if rec.get(CHAIN_KEY) != expected:
            raise RunDirError(
                f"{path}: line {lineno} fails the journal's hash chain: the journal was edited, "
                "reordered or truncated in the middle after it was written; it cannot be "
                "trusted (restore it or start a new run)"
            )
        return expected
    if CHAIN_KEY in rec:
        raise RunDirError(
            f"{path}: line {lineno} carries a hash chain but the run's manifest (schema 1) or "
            "the lines before it have none; the run directory was altered"
        )
    return prev


def _read_lines(
    path: str | Path, *, repair: bool = False, chained: bool | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_journal` with each record's 1-based line number."""
    p = Path(path)
    if p.is_dir():
        p = p / JOURNAL
    if not p.exists():
        return []
    found = _manifest_link(p)
    link: _Link | bool | None
    if chained is False:
        link = None
    elif found is False:  # no manifest: the first record decides (None), or required (True)
        link = _Link() if chained else False
    elif found is None and chained:
        link = _Link()
    else:
        link = found
    return _read_records(p, repair=repair, link=link)


def _read_records(
    p: Path, *, repair: bool, link: _Link | bool | None
) -> list[tuple[int, dict[str, Any]]]:
    """The journal ``p``'s records, chained as ``link`` says (False: as the first one does)."""
    try:
        data = read_back(p, max_bytes=JOURNAL_MAX_BYTES)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RunDirError(f"cannot read the journal: {exc.strerror}") from None
    records: list[tuple[int, dict[str, Any]]] = []
    good = 0
    prev = ""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if not line:
            if not last:
                good += 1
            continue
        try:
            rec = json.loads(line, parse_constant=_no_constants, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:
            if last:  # torn by a process killed mid-write
                break
            why = "is not valid JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise RunDirError(f"{p}: line {i + 1} {why}; the journal is damaged") from None
        if last:  # complete JSON but no newline: the write was torn before the newline
            break
        _check_shape(rec, p, i + 1)
        if link is False or link is True:
            link = _Link() if CHAIN_KEY in rec else None
        if not records and link is not None:
            prev = link.start
        prev = _check_chain(rec, prev, link=link, path=p, lineno=i + 1)
        records.append((i + 1, rec))
        good += len(line) + 1
    if isinstance(link, _Link) and link.key is not None:
        _check_seal(p, link, records)
    if repair and good < len(data):
        fd = open_append(p)  # no link followed, no file shared
        try:
            os.ftruncate(fd, good)
            os.fsync(fd)
        finally:
            os.close(fd)
    return records


def _read_seal(journal: Path, link: _Link) -> tuple[int, str] | None:
    """``(lines, chain)`` of the verified ``journal.seal`` next to ``journal`` (None: none).

    Raises:
        RunDirError: the seal is a link, not a regular file, larger than
            :data:`SEAL_MAX_BYTES`, not a seal, or its HMAC does not match.
    """
    path = journal.parent / SEAL
    try:
        seal = json.loads(read_back(path, max_bytes=SEAL_MAX_BYTES))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunDirError(f"cannot read the journal's seal: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):
        seal = None
    lines = seal.get("lines") if isinstance(seal, dict) else None
    chain = seal.get("chain") if isinstance(seal, dict) else None
    mac = seal.get("mac") if isinstance(seal, dict) else None
    if (
        isinstance(lines, bool)
        or not isinstance(lines, int)
        or not 0 <= lines < _COUNT_MAX
        or not isinstance(chain, str)
        or not isinstance(mac, str)
        or not _SHA256.fullmatch(chain)
        or not _SHA256.fullmatch(mac)
        or not hmac.compare_digest(mac, link.seal_mac(lines, chain))
    ):
        raise RunDirError(
            f"{path}: the seal's HMAC does not match (it was edited, replaced or damaged); the "
            "run cannot be trusted (restore it or start a new run)"
        )
    return lines, chain


def _check_seal(journal: Path, link: _Link, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Raise :class:`RunDirError` unless the journal reaches the head its seal names (lines
    after it are accepted: a process killed between an append and the seal's rewrite).
    """
    sealed = _read_seal(journal, link)
    if sealed is None:
        if link.sealed:
            raise RunDirError(
                f"{journal.parent / SEAL} is missing, but this keyed run (schema "
                f"{KEYED_SCHEMA_VERSION}) is sealed: lines may have been removed from its "
                "journal; the run cannot be trusted (restore it or start a new run)"
            )
        if not records:  # schema 3: no line verifies the manifest (a downgrade, then a cut)
            raise RunDirError(
                f"{journal} is empty and {SEAL} is missing: nothing verifies this keyed run's "
                "manifest, so it cannot be trusted (restore the run or start a new one)"
            )
        return
    lines, chain = sealed
    if len(records) < lines:
        raise RunDirError(
            f"{journal} ends at line {len(records)} but its seal names line {lines}: lines "
            "were removed after they were written; the run cannot be trusted (restore it or "
            "start a new run)"
        )
    head = records[lines - 1][1][CHAIN_KEY] if lines else link.start
    if head != chain:
        raise RunDirError(
            f"{journal}: line {lines} is not the head its seal names: the journal was "
            "rewritten after it was sealed; the run cannot be trusted (restore it or start a "
            "new run)"
        )


def journal_fingerprint(path: str | Path) -> list[dict[str, Any]]:
    """The journal's records without wall-clock fields (:data:`VOLATILE_KEYS`) and the hash
    chain (:data:`CHAIN_KEY`, which covers them), for comparison.
    """

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS and k != CHAIN_KEY
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(r) for r in read_journal(path)]


@final
@define(eq=False)
class RunDir:
    """An open run directory; the driver's journal recorder.

    Create one with :meth:`create` (a new run) or :meth:`open` (resume, export, report).
    """

    path: Path
    manifest: dict[str, Any]
    _fd: int | None = field(default=None, init=False)
    _board: Board | None = field(default=None, init=False)
    _board_written: float = field(default=0.0, init=False)
    _board_dirty: bool = field(default=False, init=False)
    _prev: str | None = field(default=None, init=False)
    _queue: list[Callable[[], None]] | None = field(default=None, init=False)
    _inflight: list[Callable[[], None]] = field(factory=list, init=False)
    _wake: anyio.Event | None = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)
    _failed: RunDirError | None = field(default=None, init=False)
    _stored: set[str] = field(factory=set, init=False)
    _link: _Link | bool | None = field(default=False, init=False)
    _count: int = field(default=0, init=False)
    _written: tuple[int, str] | None = field(default=None, init=False)
    _sealed: tuple[int, str] | None = field(default=None, init=False)
    _lock_fd: int | None = field(default=None, init=False)

    @property
    def chain_link(self) -> _Link | None:
        """How the journal's lines chain (None: a schema 1 run); see :func:`_link_for`."""
        if self._link is False or self._link is True:
            self._link = _link_for(self.manifest, self.path)
        return self._link

    @property
    def chained(self) -> bool:
        """Whether the journal carries the hash chain (run directories of schema 2 and later)."""
        version = self.manifest.get("schema_version", 1)
        return isinstance(version, int) and not isinstance(version, bool) and version >= 2

    @property
    def integrity(self) -> str:
        """``"keyed"`` (every read verifies the journal's HMAC chain with the user's key),
        ``"chained"`` (every read verifies the journal's hash chain: accidents are caught,
        someone who recomputes the chain is not) or ``"unchained"`` (a run written before the
        chain existed: edits to its journal cannot be detected).
        """
        if not self.chained:
            return "unchained"
        return "keyed" if self.chain_link is not None and self.chain_link.key else "chained"

    # -------------------------------------------------------------------------------- opening

    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        task: Any,
        config: SearchConfig,
        budget: Budget,
        workers: int,
        ordered: bool,
        selector: Selector,
        model: OperatorModel,
        sandbox: Sandbox,
        prompts: object,
        extra: Mapping[str, Any],
    ) -> RunDir:
        """Create a new run directory (``path`` must not exist or be empty).

        Raises:
            InvalidArgument: ``path`` holds files (resume it instead).
            RunDirError: the directory cannot be written.
        """
        p = Path(path)
        check_new_run_dir(p)  # a file, or a run with committed steps: refused before any write
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(
                f"cannot write run directory {str(p)!r}: {exc.strerror or exc}"
            ) from exc
        summary = _summary_model(prompts)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "openmle_version": __version__,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "task": {
                "name": task.name,
                "higher_is_better": task.higher_is_better,
                "description_sha256": hashlib.sha256(task.description.encode()).hexdigest(),
            },
            "model": {
                "id": str(getattr(model, "model", "") or getattr(model, "model_id", "")),
                "class": _describe(model),
                "spec": _spec_of(model),
                # an OperatorRouter: route name -> the same record per routed model, else None
                "routes": _routes_entry(model),
            },
            "sandbox": {
                "class": _describe(sandbox),
                "spec": _spec_of(sandbox),
                # True: programs could read the answers (a sandbox on a trusted machine)
                "trusted": getattr(sandbox, "trusted", False) is True,
            },
            "selector": {"class": _describe(selector), "repr": repr(selector)[:500]},
            "prompts": {"class": _describe(prompts), "template_sha256": _template_hash(prompts)},
            # the model that writes node summaries (None: no summaries)
            "summary_model": None if summary is None else _model_entry(summary),
            "budget": budget.to_dict(),
            "config": config.to_dict(),
            "seeds": {"search": config.seed},
            "trust_printed_score": config.trust_printed_score,
            "score_used_for_selection": (
                "printed_score" if config.trust_printed_score else "sandbox_valid_score"
            ),
            "workers": workers,
            "ordered": ordered,
            "packages": _package_versions(),
            "hardware": _hardware(),
            "extra": dict(extra),
        }
        lock = _claim_writer(p)  # before the check that may start over in another's files
        try:
            rd = cls._create_locked(p, manifest)
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        rd._lock_fd = lock
        rd._open_journal()
        rd.session("start", budget=rd.manifest["budget"])
        return rd

    @classmethod
    def _create_locked(cls, p: Path, manifest: dict[str, Any]) -> RunDir:
        """:meth:`create`'s files (its ``manifest``), written under the writer lock."""
        if check_new_run_dir(p):
            warnings.warn(
                f"run_dir={str(p)!r} holds a run with no committed step; starting over in it",
                UserWarning,
                stacklevel=4,
            )
            try:
                _clear_uncommitted(p)
            except OSError as exc:
                raise RunDirError(f"cannot start over in {str(p)!r}: {exc}") from exc
        key = journal_key()
        if key is not None:
            manifest["schema_version"] = KEYED_SCHEMA_VERSION
            manifest["journal"] = {"chain": "hmac-sha256", "key_id": _key_id(key)}
        manifest = json.loads(json.dumps(manifest))  # as it will read back
        try:
            p.mkdir(parents=True, exist_ok=True)
            ensure_dir(p, "nodes")
            append_file(
                p / JOURNAL, b""
            )  # before the manifest: a manifest without a journal is damage
            if key is not None:  # so is a sealed manifest without its seal
                link = _Link(key=key, start=_manifest_mac(key, manifest), sealed=True)
                write_file(p / SEAL, link.seal(0, link.start), fsync=True)
            _atomic_write(p / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
        except OSError as exc:
            raise RunDirError(
                f"cannot write run directory {str(p)!r}: {exc.strerror or exc}"
            ) from exc
        return cls(path=p, manifest=manifest)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """Open an existing run directory (read its manifest).

        Raises:
            RunDirError: no manifest, or an unreadable one.
        """
        p = Path(path)
        if p.exists() and not p.is_dir():
            raise RunDirError(
                f"{str(p)!r} is a file, not a run directory; pass the directory given to "
                "`openmle search --out`"
            )
        try:
            manifest = read_back_json(p / MANIFEST, max_bytes=MANIFEST_MAX_BYTES)
        except FileNotFoundError:
            raise RunDirError(
                f"{str(p)!r} is not a run directory (no {MANIFEST}); pass the directory "
                "given to `openmle search --out`"
            ) from None
        except OSError as exc:
            raise RunDirError(f"cannot read {p / MANIFEST}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise RunDirError(f"cannot read {p / MANIFEST}: {exc}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("task"), dict):
            raise RunDirError(f"{p / MANIFEST} is not a run manifest (no task entry)")
        _check_manifest(manifest, p / MANIFEST)
        if not (p / JOURNAL).is_file():
            raise RunDirError(
                f"{str(p)!r} has a manifest but no {JOURNAL}: the run's record is missing, so it "
                "can be neither resumed nor reported; restore the journal or start a new run "
                "in a new directory"
            )
        rd = cls(path=p, manifest=manifest)
        _ = rd.chain_link  # a keyed run without its key, or a downgrade, is refused here
        return rd

    def claim(self) -> None:
        """Take the run's writer lock before resuming it (idempotent; :meth:`close` drops it).

        Raises:
            RunDirError: another process is writing the run (it names the process).
        """
        if self._lock_fd is None:
            self._lock_fd = _claim_writer(self.path)

    def _open_journal(self) -> None:
        if self._fd is None:
            try:
                self._fd = open_append(self.path / JOURNAL)
            except OSError as exc:
                raise RunDirError(
                    f"cannot write run directory {str(self.path)!r}: {exc.strerror or exc}"
                ) from None

    def close(self) -> None:
        """Write the board if it changed and close the journal file."""
        if self._board_dirty:
            self._write_board()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:  # last: every write is done
            os.close(self._lock_fd)
            self._lock_fd = None

    # -------------------------------------------------------------------------------- writing

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Write off the event loop while the block runs.

        Inside the block every write (journal lines with their ``fsync``, node and final files,
        the board, session events) is queued in call order and done by one writer task in a
        worker thread, each batch ending with one ``fsync`` of the journal. The order on disk is
        the order of the calls, each write happens once, and a write that started completes
        even when the run is cancelled. Leaving the block (also by cancellation or an error)
        writes whatever is still queued, shielded, so every record the block made is on disk
        when it exits. Outside the block the same methods write synchronously.

        Raises:
            RunDirError: a write failed (the disk is full, the directory went away); nothing
                queued after it is written, so the journal ends at the last complete line.
        """
        if self._queue is not None:
            raise RuntimeError("RunDir.writing() is already active")
        self._queue, self._wake, self._stopping, self._failed = [], anyio.Event(), False, None
        limiter = anyio.CapacityLimiter(1)  # its own thread slot: never starved by the sandbox
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._writer, limiter)
                try:
                    yield
                finally:
                    if self._board_dirty and self._failed is None:
                        self._write_board()
                    self._stopping = True
                    wake = self._wake
                    if wake is not None:
                        wake.set()
        finally:
            try:
                with anyio.CancelScope(shield=True):
                    # the writer was cancelled: what it had not started, then what was queued
                    self._inflight += self._queue or []
                    self._queue = []
                    if self._failed is None and self._inflight:
                        await anyio.to_thread.run_sync(self._run_batch, limiter=limiter)
            finally:
                self._queue = None
                self._inflight = []
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed

    async def _writer(self, limiter: anyio.CapacityLimiter) -> None:
        while True:
            queue = self._queue
            if queue is None or self._failed is not None:
                return
            if not queue:
                if self._stopping:
                    return
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            self._inflight, self._queue = queue, []
            # Not abandoned on cancellation: a batch that started completes. Cancelled before
            # it started, the batch stays in _inflight for the shielded drain.
            await anyio.to_thread.run_sync(self._run_batch, limiter=limiter)

    def _run_batch(self) -> None:
        """Run the writes in ``_inflight`` in order, each removed once done, then ``fsync`` the
        journal once (in a worker thread; the event loop does not touch ``_inflight`` meanwhile).
        """
        try:
            while self._inflight:
                self._inflight[0]()
                del self._inflight[0]
            if self._fd is not None:
                os.fsync(self._fd)
            self._seal()
        except OSError as exc:
            self._failed = RunDirError(
                f"cannot write run directory {str(self.path)!r}: {exc.strerror or exc}"
            )
            raise self._failed from exc

    def _submit(self, op: Callable[[], None]) -> None:
        """Run ``op`` now (no writer) or queue it for the writer."""
        if self._failed is not None:
            raise self._failed
        if self._queue is None:
            try:
                op()
            except OSError as exc:
                raise RunDirError(
                    f"cannot write run directory {str(self.path)!r}: {exc.strerror or exc}"
                ) from None
            return
        self._queue.append(op)
        if self._wake is not None:
            self._wake.set()

    def _append(self, record: Mapping[str, Any]) -> None:
        self._open_journal()
        link = self.chain_link
        head: tuple[int, str] | None = None
        if link is not None:
            if self._prev is None:
                lines = self._lines()
                self._prev = str(lines[-1][1][CHAIN_KEY]) if lines else link.start
                self._count = len(lines)
            chain = link.next(self._prev, record)
            record = {**record, CHAIN_KEY: chain}
            self._prev = chain  # the next record chains from this one, written or queued
            self._count += 1
            head = (self._count, chain) if link.key is not None else None
        line = _json_line(record)
        if self._queue is None:
            self._write_line(line, head)
            os.fsync(self._journal_fd())
            self._seal()
        else:  # fsync'd and sealed at the end of its batch
            self._submit(partial(self._write_line, line, head))

    def _seal(self) -> None:
        """Rewrite ``journal.seal`` (a keyed run) to name the last line written, once the
        journal is fsync'd: atomically, no link followed, fsync'd; nothing when it already does.
        """
        link, head = self.chain_link, self._written
        if link is None or head is None or head == self._sealed:
            return
        write_file(self.path / SEAL, link.seal(*head), fsync=True)
        self._sealed = head

    def _journal_fd(self) -> int:
        if self._fd is None:
            raise AssertionError("internal invariant broken: self._fd is not None")
        return self._fd

    def _write_line(self, line: bytes, head: tuple[int, str] | None = None) -> None:
        """Append ``line``; ``head``: its line number and chain value, for the next seal."""
        fd = self._journal_fd()
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if head is not None:
            self._written = head

    def session(self, kind: str, **info: Any) -> None:
        """Append a session event (start, resume, end) with a timestamp to ``sessions.jsonl``."""
        rec = {"event": kind, "time": time.time(), "pid": os.getpid(), **info}
        self._submit(partial(_append_text, self.path / SESSIONS, json.dumps(rec, sort_keys=True)))

    def proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        """Journal a proposal and the generator state after it."""
        self._append({"event": "proposal", "proposal": proposal.to_dict(), "rng": dict(rng_state)})

    def node(self, node: Node, logs: str, *, request: ModelRequest | None = None) -> None:
        """Store the node's program and logs (and ``request``, the exact request the model saw,
        under ``requests/`` once per distinct request), then journal it (naming the request's
        hash) and refresh the board.
        """
        self._submit(partial(_write_files, self.path, ("nodes", node.node_id), node.code, logs))
        digest: str | None = None
        if request is not None:
            digest, data = encode_request(request)
            if digest not in self._stored:
                self._stored.add(digest)
                self._submit(partial(_write_blob, self._request_path(digest), data))
        self._append({"event": "node", "node": node.to_dict(), "request": digest})
        self._add_to_board(node)
        self._board_dirty = True
        if time.monotonic() - self._board_written >= BOARD_INTERVAL_S:
            self._write_board()

    def cancel(self, step: int, reason: str, *, elapsed_s: float = 0.0) -> None:
        """Journal a cancelled step (with the run's elapsed seconds, carried over on resume)."""
        self._append(
            {"event": "cancel", "step": step, "reason": reason, "elapsed_s": float(elapsed_s)}
        )

    def final(self, node: Node, result: RunResult) -> None:
        """Store and journal the chosen program's test-split result."""
        files = partial(
            _write_files, self.path, ("final",), node.code, result.logs, logs_name="test_logs.txt"
        )
        self._submit(files)
        self._append({"event": "final", "node_id": node.node_id, "result": result.to_dict()})

    def _add_to_board(self, node: Node) -> None:
        if self._board is None:
            hib = bool(self.manifest["task"]["higher_is_better"])
            self._board = Board(task=TaskMeta(higher_is_better=hib))
        if node.card is not None and not self._board.has(node.node_id):
            self._board.add(node.card)

    def _write_board(self) -> None:
        if self._board is not None:
            text = json.dumps(self._board.to_dict(), indent=1, sort_keys=True)
            self._submit(partial(_atomic_write, self.path / BOARD, text))
        self._board_written = time.monotonic()
        self._board_dirty = False

    # -------------------------------------------------------------------------------- reading

    def records(self) -> list[dict[str, Any]]:
        """The journal's records (hash chain verified)."""
        return [rec for _, rec in self._lines()]

    def _lines(self, *, repair: bool = False) -> list[tuple[int, dict[str, Any]]]:
        return _read_records(self.path / JOURNAL, repair=repair, link=self.chain_link)

    def _bad(self, line: int, exc: BaseException) -> RunDirError:
        return RunDirError(
            f"{self.path / JOURNAL}: line {line} is not a valid journal record "
            f"({type(exc).__name__}: {str(exc)[:200]}); the journal is damaged"
        )

    def nodes(self) -> list[Node]:
        """Every committed node, in journal order."""
        out: list[Node] = []
        for line, r in self._lines():
            if r["event"] == "node":
                try:
                    out.append(_node(r))
                except _BAD_RECORD as exc:
                    raise self._bad(line, exc) from None
        return out

    def node_requests(self) -> dict[str, str]:
        """Node id -> the SHA-256 of the request the model saw for it, for the nodes whose
        journal record names one (runs written before requests were recorded name none).

        Raises:
            RunDirError: a record's ``"request"`` is not 64 lowercase hex digits.
        """
        out: dict[str, str] = {}
        for line, r in self._lines():
            if r["event"] != "node" or r.get("request") is None:
                continue
            digest = r["request"]
            if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
                raise RunDirError(
                    f"{self.path / JOURNAL}: line {line} names request {str(digest)[:80]!r}, "
                    "which is not a SHA-256 in hex; the journal is damaged"
                )
            node = r["node"]
            out[str(node.get("node_id"))] = digest
        return out

    def _request_path(self, digest: str) -> Path:
        return self.path / REQUESTS / f"{digest}.json.gz"

    def request(self, digest: str) -> ModelRequest:
        """The recorded request named ``digest`` (see :meth:`node_requests`), verified.

        Raises:
            RunDirError: ``digest`` is not a SHA-256 in hex; the blob is missing, not gzip,
                larger than :data:`REQUEST_MAX_BYTES` decompressed, does not hash to its name,
                or is not a request (the message names the file).
        """
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise RunDirError(f"{str(digest)[:80]!r} is not a request hash (64 hex digits)")
        path = self._request_path(digest)
        try:
            fd = open_back(path, max_bytes=REQUEST_MAX_BYTES)
            with os.fdopen(fd, "rb") as raw, gzip.open(raw, "rb") as f:
                data = f.read(REQUEST_MAX_BYTES + 1)
        except FileNotFoundError:
            raise RunDirError(
                f"{path}: the recorded request is missing (the journal names it); the run "
                "directory was altered or copied without requests/"
            ) from None
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise RunDirError(f"{path}: the recorded request cannot be read ({exc})") from None
        if len(data) > REQUEST_MAX_BYTES:
            raise RunDirError(
                f"{path}: the recorded request decompresses to more than "
                f"{REQUEST_MAX_BYTES} bytes; refused"
            )
        if hashlib.sha256(data).hexdigest() != digest:
            raise RunDirError(
                f"{path}: the recorded request does not match its hash (it was edited or "
                "damaged); it cannot be trusted"
            )
        try:
            return decode_request(json.loads(data))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise RunDirError(
                f"{path}: not a recorded request ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None

    def final_result(self) -> tuple[str, RunResult] | None:
        """``(node_id, test result)`` when the final grade was journalled.

        Raises:
            RunDirError: the record is malformed, names no journalled node, or holds a result
                that is not on the test split.
        """
        out: tuple[str, RunResult] | None = None
        ids: set[str] = set()
        for line, r in self._lines():
            if r["event"] == "node":
                node = r.get("node")
                if isinstance(node, dict):
                    ids.add(str(node.get("node_id")))
            elif r["event"] == "final":
                try:
                    out = _final(r, ids)
                except _BAD_RECORD as exc:
                    raise self._bad(line, exc) from None
        return out

    def budget(self) -> Budget:
        """The budget in force: the one the latest session recorded in ``sessions.jsonl``
        (``openmle resume --budget`` or ``ResumeSpec(budget=...)`` may have changed it), else
        the manifest's (the budget the run started with). A keyed run (:attr:`integrity`)
        always answers the manifest's: its key covers the manifest, not ``sessions.jsonl``, so
        an edit there could lift its caps (a resume that changes them passes its budget).

        Raises:
            RunDirError: the manifest's budget is not a budget.
        """
        sessions = [] if self.integrity == "keyed" else self.sessions()
        for rec in reversed(sessions):
            recorded = rec.get("budget")
            if isinstance(recorded, Mapping):
                try:
                    return Budget.from_dict(recorded)
                except (OpenMLEError, TypeError, ValueError):
                    break  # informational file: a damaged entry falls back to the manifest
        try:
            return Budget.from_dict(self.manifest["budget"])
        except (OpenMLEError, TypeError, ValueError, KeyError) as exc:
            raise RunDirError(
                f"{self.path / MANIFEST}: its budget is not a budget ({exc}); the manifest is "
                "damaged"
            ) from None

    def sessions(self) -> list[dict[str, Any]]:
        """The session events (lines that are not JSON objects with an ``"event"`` skipped:
        the file is informational, the journal is the record).
        """
        p = self.path / SESSIONS
        if not p.exists():
            return []
        out: list[dict[str, Any]] = []
        try:
            text = read_back_text(p, max_bytes=SESSIONS_MAX_BYTES, errors="replace")
        except OSError:
            return []  # informational: an unreadable file holds no sessions
        for x in text.splitlines():
            try:
                rec = json.loads(x)
            except (ValueError, RecursionError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("event"), str):
                out.append(rec)
        return out

    def replay(
        self, core: SearchCore, on_proposal: Callable[[Proposal], object] | None = None
    ) -> list[Proposal]:
        """Rebuild ``core`` from the journal (repairing a torn last line).

        Args:
            core: a fresh core with the run's config.
            on_proposal: called right after each proposal is replayed, with the core in the
                state it had when the proposal was made (the driver builds prompts here).

        Returns:
            The proposals that were in flight (to re-queue), in step order.
        """
        ids: set[str] = set()
        lines = self._lines(repair=True)
        link = self.chain_link
        if link is not None:  # new lines chain from the last one read (no second read)
            self._prev = str(lines[-1][1][CHAIN_KEY]) if lines else link.start
            self._count = len(lines)
            if link.key is not None:  # (re)seal the verified head: a schema 3 run gets a seal
                self._written = (self._count, self._prev)
                self._submit(self._seal)
        for line, r in lines:
            kind = r["event"]
            replayed: Proposal | None = None
            try:
                if kind == "proposal":
                    replayed = _proposal(r)
                    core.restore_proposal(replayed, r["rng"])
                elif kind == "node":
                    node = _node(r)
                    core.apply(node)
                    ids.add(node.node_id)
                    self._add_to_board(node)
                elif kind == "cancel":
                    step = r["step"]
                    if isinstance(step, bool) or not isinstance(step, int):
                        raise TypeError(f"step must be an integer, got {step!r}")
                    core.cancel(step)
                    elapsed = r.get("elapsed_s", 0.0)
                    if isinstance(elapsed, int | float) and not isinstance(elapsed, bool):
                        core.last_elapsed_s = max(core.last_elapsed_s, float(elapsed))
                elif kind == "final":
                    _final(r, ids)
                else:
                    raise RunDirError(
                        f"{self.path / JOURNAL}: line {line} has unknown event {kind!r}"
                    )
            except _BAD_RECORD as exc:
                raise self._bad(line, exc) from None
            if replayed is not None and on_proposal is not None:
                on_proposal(replayed)  # outside the try: its errors are not journal damage
        return list(core.pending_in_order())


_BAD_RECORD = (KeyError, TypeError, ValueError, AttributeError, IndexError, InvalidArgument)
"""What converting a malformed record raises (InvalidArgument is a ValueError too)."""


_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""A journalled node id: what the search writes (``n00042``), never a path (no ``/``, no
``..``, no NUL), at most 128 characters."""
_COUNT_MAX = 2**53
_LINEAGE_INTS = ("step", "generation", "debug_depth")
_NODE_STRS = ("reason", "code", "plan", "detail", "feedback", "family", "model")


def _check_lineage(data: Mapping[str, Any]) -> None:
    """Raise TypeError/ValueError unless the id, counters and parents of a journalled node or
    proposal have their types: what the report, the export and a resume compute with.
    """
    node_id = data.get("node_id")
    if not isinstance(node_id, str) or not _NODE_ID.fullmatch(node_id):
        raise ValueError(f"node_id {str(node_id)[:80]!r} is not a node id (like 'n00042')")
    for key in _LINEAGE_INTS:
        value = data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _COUNT_MAX:
            raise ValueError(f"{key} {str(value)[:40]!r} is not an integer in [0, 2**53)")
    parents = data.get("parent_ids")
    if not isinstance(parents, list) or not all(
        isinstance(x, str) and _NODE_ID.fullmatch(x) for x in parents
    ):
        raise ValueError(f"parent_ids {str(parents)[:80]!r} is not a list of node ids")


def _check_node(data: Mapping[str, Any]) -> None:
    """:func:`_check_lineage`, and the node's text and numbers have their types."""
    _check_lineage(data)
    for key in _NODE_STRS:
        if not isinstance(data.get(key), str):
            raise TypeError(f"{key} is not a string")
    if data.get("error_signature") is not None and not isinstance(data["error_signature"], str):
        raise TypeError("error_signature is not a string or null")
    exit_code = data.get("exit_code")
    if exit_code is not None and (
        isinstance(exit_code, bool) or not isinstance(exit_code, int) or abs(exit_code) >= 2**63
    ):
        raise ValueError(f"exit_code {str(exit_code)[:40]!r} is not a 64-bit integer or null")
    used = data.get("used")
    numbers = [data.get("elapsed_s", 0.0), *(used.values() if isinstance(used, dict) else ())]
    for value in numbers:
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or abs(value) >= _COUNT_MAX
        ):
            raise ValueError(f"{str(value)[:40]!r} is not a finite number (elapsed_s, used)")


def _entry(record: Mapping[str, Any], key: str) -> dict[str, Any]:
    data = record[key]
    if not isinstance(data, dict):
        raise TypeError(f"the {key} entry is not an object")
    return data


def _node(record: Mapping[str, Any]) -> Node:
    data = _entry(record, "node")
    _check_node(data)
    return Node.from_dict(data)


def _proposal(record: Mapping[str, Any]) -> Proposal:
    data = _entry(record, "proposal")
    _check_lineage(data)
    return Proposal.from_dict(data)


def _final(record: Mapping[str, Any], node_ids: set[str]) -> tuple[str, RunResult]:
    node_id = record["node_id"]
    if not isinstance(node_id, str) or node_id not in node_ids:
        raise ValueError(f"the final record names {node_id!r}, which is no journalled node")
    data = record["result"]
    if not isinstance(data, dict):
        raise TypeError("the result entry is not an object")
    result = RunResult.from_dict(data)
    if result.split.value != "test":
        raise ValueError(f"the final result is on split {result.split.value!r}, not 'test'")
    return node_id, result


DATA_TASK_DIR = "task"
"""Where ``openmle search --data`` builds the task package, inside the run directory."""
_RUN_FILES = frozenset(
    {
        JOURNAL,
        SEAL,
        MANIFEST,
        SESSIONS,
        BOARD,
        WRITER_LOCK,
        "nodes",
        "summaries",
        REQUESTS,
        DATA_TASK_DIR,
    }
)
"""What a run directory holds before its first committed step (``nodes/`` then empty; the
task package ``--data`` built)."""


def check_new_run_dir(path: str | Path) -> bool:
    """Whether a new run may be written at ``path`` without writing anything: False when it does
    not exist or is empty, True when it holds only a run with no committed step (a failed or
    interrupted start: :meth:`RunDir.create` starts over in it).

    Raises:
        InvalidArgument: ``path`` is a file, holds other files, or holds a run with at least one
            committed step (resume it or choose a new directory).
    """
    p = Path(path)
    if not p.exists():
        return False
    refuse = InvalidArgument(
        f"run_dir={str(p)!r} already exists and is not empty; "
        "resume it with `openmle resume` or choose a new directory"
    )
    if not p.is_dir():
        raise InvalidArgument(
            f"run_dir={str(p)!r} is a file, not a run directory; choose a new directory"
        )
    entries = {e.name: e for e in p.iterdir()}
    if not set(entries) - {DATA_TASK_DIR, WRITER_LOCK}:
        return False
    if not set(entries) <= _RUN_FILES or any(
        (p / d).exists() and (not (p / d).is_dir() or any((p / d).iterdir()))
        for d in ("nodes", "summaries")
    ):
        raise refuse
    try:
        records = read_journal(p / JOURNAL)
    except RunDirError as exc:
        raise InvalidArgument(
            f"run_dir={str(p)!r} holds a damaged run ({exc}); choose a new directory"
        ) from None
    if any(r["event"] in ("node", "final") for r in records):
        raise InvalidArgument(
            f"run_dir={str(p)!r} already holds a run with committed steps; resume it with "
            "`openmle resume` (or resume_search) or choose a new directory"
        )
    return True


def reset_unstarted_run_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a started run (its manifest), to be resumed; where it does not
    (a run killed while being made, or whatever a directory received from elsewhere holds
    there) its contents are removed, under the run's writer lock, so that a driver making that
    run at this moment is refused instead of having its files deleted. The directory itself
    stays (made when missing); :meth:`RunDir.create` starts the run in it.

    Raises:
        RunDirError: ``path`` is a symbolic link, another process holds the run's writer
            lock (it is making or driving the run: it names the process), or the directory
            cannot be made or cleared.
    """
    p = Path(path)
    if p.is_symlink():  # its contents are removed: never those of a folder it leads to
        raise RunDirError(f"run directory {str(p)!r} is a symbolic link; pass the folder itself")
    if (p / MANIFEST).is_file():
        return True
    try:
        p.mkdir(parents=True, exist_ok=True)
        lock = p / WRITER_LOCK
        if _not_own_file(lock) and not remove_tree(lock):  # a received link in its place
            raise OSError(f"cannot remove {lock}")
    except OSError as exc:
        raise RunDirError(f"cannot write run directory {str(p)!r}: {exc.strerror or exc}") from None
    fd = _claim_writer(p)
    try:
        if (p / MANIFEST).is_file():  # made by the driver that held the lock a moment ago
            return True
        left = [e for e in p.iterdir() if e.name != WRITER_LOCK and not remove_tree(e)]
        if left:
            raise OSError(f"cannot remove {left[0]}")
    except OSError as exc:
        raise RunDirError(f"cannot clear run directory {str(p)!r}: {exc.strerror or exc}") from None
    finally:
        if fd is not None:
            os.close(fd)
    return False


def _not_own_file(path: Path) -> bool:
    """Whether something stands at ``path`` that is not a regular file with one name (a
    symbolic or hard link, a folder).
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    return not stat.S_ISREG(st.st_mode) or st.st_nlink != 1


def _holder(fd: int) -> str:
    """`` (process PID on HOST)`` from the lock file's holder line; nothing when it names none
    (the file is untrusted: only a well-formed line is shown).
    """
    with contextlib.suppress(OSError, UnicodeDecodeError):
        line = os.pread(fd, 128, 0).decode("ascii").strip()
        if _HOLDER.match(line):
            pid, host = line.split(" ")
            return f" (process {pid} on {host})"
    return ""


def _claim_writer(p: Path) -> int | None:
    """Take the run directory's writer lock: an exclusive, non-blocking ``flock`` on
    ``p/writer.lock``, held until the returned descriptor is closed (the kernel drops it when
    the process dies, ``kill -9`` included). None on a file system without locks (logged).

    Raises:
        RunDirError: another process holds it (a second driver of the same run: its journal
            lines would interleave with ours and break the hash chain), or it cannot be made.
    """
    try:
        fd = os.open(p / WRITER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise RunDirError(f"cannot write run directory {str(p)!r}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # the holder line is written to it
        os.close(fd)
        raise RunDirError(
            f"{str(p / WRITER_LOCK)!r} is not a file of the run's own (a hard link or not a "
            "regular file: a run directory from elsewhere); remove it, then run again"
        )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _NO_LOCKS:
            log.warning("%s: the file system offers no locks; nothing keeps a second driver "
                        "of this run out (%s)", p, exc.strerror or exc)  # fmt: skip
            return fd
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise RunDirError(
                f"run directory {str(p)!r} is being written by another process{holder}: two "
                "drivers would interleave its journal; wait until it ends (or stop it), then "
                "resume the run"
            ) from None
        raise RunDirError(f"cannot lock run directory {str(p)!r}: {exc.strerror or exc}") from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()[:64]}\n".encode(), 0)
    return fd


def _clear_uncommitted(p: Path) -> None:
    """Remove the files of a run with no committed step (checked by :func:`check_new_run_dir`),
    keeping ``sessions.jsonl`` (the record of who worked on the directory).
    """
    for name in (MANIFEST, JOURNAL, SEAL, BOARD):
        (p / name).unlink(missing_ok=True)
    requests = p / REQUESTS
    if requests.is_dir():  # blobs of steps killed before their node line: never referenced
        for blob in requests.iterdir():
            blob.unlink()
    for d in ("nodes", "summaries", REQUESTS):
        if (p / d).is_dir():
            (p / d).rmdir()


def _write_files(
    root: Path, parts: tuple[str, ...], code: str, logs: str, *, logs_name: str = "logs.txt"
) -> None:
    """Write a node's program and logs into ``root/parts`` (real directories, no link followed)."""
    d = ensure_dir(root, *parts)
    write_file(d / "program.py", code.encode("utf-8", "backslashreplace"))
    write_file(d / logs_name, logs.encode("utf-8", "backslashreplace"))


def _append_text(path: Path, line: str) -> None:
    append_file(path, (line + "\n").encode("utf-8", "backslashreplace"))


def _atomic_write(path: Path, text: str) -> None:
    write_file(path, text.encode("utf-8", "backslashreplace"))


def encode_request(request: ModelRequest) -> tuple[str, bytes]:
    """``(sha256 hex, canonical JSON bytes)`` of what determines the model's prompt: messages,
    operator, sampling settings and metadata (non-JSON metadata values as their ``str``).
    """
    data = {
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "operator": None if request.operator is None else request.operator.value,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
        "stop": list(request.stop),
        "metadata": dict(request.metadata),
    }
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    body = raw.encode("utf-8", "backslashreplace")
    return hashlib.sha256(body).hexdigest(), body


def decode_request(data: Any) -> ModelRequest:
    """Inverse of :func:`encode_request` (on the parsed JSON)."""
    if not isinstance(data, dict):
        raise TypeError("a recorded request is a JSON object")
    messages = data["messages"]
    if not isinstance(messages, list):
        raise TypeError("messages is not a list")
    op = data.get("operator")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TypeError("metadata is not an object")
    return ModelRequest(
        messages=[Message(role=m["role"], content=m["content"]) for m in messages],
        operator=None if op is None else Operator(op),
        temperature=data.get("temperature"),
        top_p=data.get("top_p"),
        max_tokens=data.get("max_tokens"),
        seed=data.get("seed"),
        stop=tuple(data.get("stop") or ()),
        metadata=metadata,
    )


def _write_blob(path: Path, data: bytes) -> None:
    """Write ``data`` gzip'd to ``path`` once (atomically and fsync'd; kept if present)."""
    if os.path.lexists(path):
        return
    ensure_dir(path.parent.parent, path.parent.name)
    write_file(path, gzip.compress(data, compresslevel=6, mtime=0), fsync=True)
