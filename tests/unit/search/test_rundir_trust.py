"""What a run directory may not make ``export``, ``report`` and ``resume`` do or accept.

- Files read back are regular files, size-capped, opened without following links: a FIFO
  manifest does not hang, a manifest linked to ``/dev/zero`` is refused (issue 25, item 9).
- The journal's chain cannot be dropped by rewriting the manifest to schema 1 (a downgrade),
  and a keyed chain (``OPENMLE_JOURNAL_KEY``) refuses a journal whose scores were edited and
  whose chain was recomputed without the key (issue 25, item 8).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.unit.search._det import det_parts

import openmle
from openmle.errors import RunDirError
from openmle.search import Budget, RunDir, SearchConfig, SearchSpec, run_search

KEY = "k" * 32


def _run(tmp_path: Path, name: str = "a", steps: int = 4) -> Path:
    out = tmp_path / name
    run_search(
        SearchSpec(
            task="toy",
            higher_is_better=True,
            **det_parts(),
            budget=Budget(steps=steps),
            config=SearchConfig(initial_drafts=2, seed=7),
            workers=1,
            ordered=True,
            description="",
        ),
        run_dir=out,
    )
    return out


def _cli(
    *args: str, memory_mb: int = 2048, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m openmle ARGS`` under an address-space limit, killed after 120 s (with
    journal key ``key``, else none)."""
    src = str(Path(openmle.__file__).parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENMLE_JOURNAL")}
    env["PYTHONPATH"] = src
    if key is not None:
        env["OPENMLE_JOURNAL_KEY"] = key

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    return subprocess.run(
        [sys.executable, "-m", "openmle", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        preexec_fn=limit,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["export"],
        ["report"],
        ["resume", "--model", "offline-numpy", "--sandbox", "local", "--quiet"],
    ],
)
def test_a_fifo_manifest_does_not_hang_export_report_or_resume(
    tmp_path: Path, command: list[str]
) -> None:
    out = _run(tmp_path)
    (out / "manifest.json").unlink()
    os.mkfifo(out / "manifest.json")
    proc = _cli(command[0], str(out), *command[1:])  # a hang is TimeoutExpired: a failure
    assert proc.returncode != 0
    assert "not a regular file" in proc.stderr, proc.stderr


def test_a_manifest_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path)
    (out / "manifest.json").unlink()
    (out / "manifest.json").symlink_to("/dev/zero")
    with pytest.raises(RunDirError, match="symbolic link"):
        RunDir.open(out)
    proc = _cli("export", str(out))
    assert proc.returncode != 0 and "symbolic link" in proc.stderr, proc.stderr[-2000:]


def test_journal_and_requests_read_back_without_following_links(tmp_path: Path) -> None:
    out = _run(tmp_path)
    (out / "journal.jsonl").rename(out / "real.jsonl")
    (out / "journal.jsonl").symlink_to(out / "real.jsonl")
    with pytest.raises(RunDirError, match="symbolic link"):
        RunDir.open(out).nodes()


def _forge_scores(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in records:
        if r["event"] == "node" and r["node"]["score"] is not None:
            r["node"]["score"] = r["node"]["valid_score"] = 0.999
    return records


def _rewrite(run: Path, edit: Any, *, chain: bool) -> None:
    """Edit the records and recompute the unkeyed chain (what anyone can do) or drop it."""
    p = run / "journal.jsonl"
    records = edit([json.loads(x) for x in p.read_text().splitlines()])
    prev = ""
    lines = []
    for r in records:
        r.pop("chain", None)
        if chain:
            body = json.dumps(r, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
            prev = hashlib.sha256(prev.encode() + b"\n" + body.encode()).hexdigest()
            r["chain"] = prev
        lines.append(json.dumps(r) + "\n")
    p.write_text("".join(lines))


def _set_manifest(run: Path, **changes: Any) -> None:
    m = json.loads((run / "manifest.json").read_text())
    m.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        m.pop(k)
    (run / "manifest.json").write_text(json.dumps(m))


def test_a_schema_downgrade_that_drops_the_chain_is_refused(tmp_path: Path) -> None:
    """Every score edited, the chain fields dropped and ``schema_version: 1`` set: export
    must not accept the forged scores."""
    out = _run(tmp_path)
    _rewrite(out, _forge_scores, chain=False)
    _set_manifest(out, schema_version=1)
    with pytest.raises(RunDirError, match="downgraded"):
        RunDir.open(out).nodes()
    proc = _cli("export", str(out))
    assert proc.returncode != 0 and "downgraded" in proc.stderr, proc.stderr[-2000:]


def test_an_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path)
    _set_manifest(out, schema_version=99)
    with pytest.raises(RunDirError, match="schema_version"):
        RunDir.open(out)


@pytest.fixture
def keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run written with journal key ``KEY``, which stays set."""
    monkeypatch.setenv("OPENMLE_JOURNAL_KEY", KEY)
    return _run(tmp_path)


def test_a_keyed_chain_refuses_a_recomputed_forgery(keyed: Path) -> None:
    out = keyed
    rd = RunDir.open(out)
    assert rd.integrity == "keyed" and rd.manifest["schema_version"] == 4
    honest = [n.score for n in rd.nodes()]
    assert honest
    # The forger recomputes the (unkeyed) chain after editing every score: refused.
    _rewrite(out, _forge_scores, chain=True)
    with pytest.raises(RunDirError, match="hash chain"):
        RunDir.open(out).nodes()
    # ... or rewrites the manifest to an unkeyed schema: refused while the key is set.
    _set_manifest(out, schema_version=2, journal=None)
    with pytest.raises(RunDirError, match="downgrade"):
        RunDir.open(out)


def test_a_keyed_run_needs_its_key_and_covers_the_manifest(
    keyed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = keyed
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    monkeypatch.delenv("OPENMLE_JOURNAL_KEY")
    with pytest.raises(RunDirError, match="OPENMLE_JOURNAL_KEY"):
        RunDir.open(out)
    monkeypatch.setenv("OPENMLE_JOURNAL_KEY_FILE", str(key_file))
    assert len(RunDir.open(out).nodes()) == 4  # the same key, from a file
    monkeypatch.setenv("OPENMLE_JOURNAL_KEY", "another key of enough length")
    with pytest.raises(RunDirError, match="another journal key"):
        RunDir.open(out)
    monkeypatch.setenv("OPENMLE_JOURNAL_KEY", KEY)
    m = json.loads((out / "manifest.json").read_text())
    m["model"]["spec"] = "openai:http://127.0.0.1:9/v1"  # an edit to the manifest
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(RunDirError, match="hash chain"):
        RunDir.open(out).nodes()


def test_a_keyed_runs_budget_is_never_lifted_by_an_edit_to_its_sessions(keyed: Path) -> None:
    """sessions.jsonl records each session's budget but no key covers it: an edit there that
    lifts the caps changes nothing in a keyed run (the next resume keeps the manifest's)."""
    started = RunDir.open(keyed).budget()
    with (keyed / "sessions.jsonl").open("a") as fh:
        fh.write(json.dumps({"event": "resume", "budget": {"steps": 10**6}}) + "\n")
    assert RunDir.open(keyed).budget() == started and started.steps != 10**6


# ----------------------------------------------------------------------------- writing into one
# A run directory sent by someone else may hold links where openmle writes: report.html ->
# ~/.bashrc, nodes -> a directory outside. Writing through one would change a file outside it.


def _canary(tmp_path: Path) -> Path:
    c = tmp_path / "canary.txt"
    c.write_bytes(b"CANARY\n")
    return c


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("report.html", "symlink"),
        ("report.html", "hardlink"),
        ("score.png", "symlink"),
        ("score.svg", "symlink"),
        ("nodes.jsonl", "symlink"),
        ("nodes.parquet", "symlink"),
    ],
)
def test_report_and_export_replace_a_link_in_the_run_dir_never_write_through_it(
    tmp_path: Path, name: str, how: str
) -> None:
    from openmle.search import export_run, write_report

    out = _run(tmp_path)
    canary = _canary(tmp_path)
    if how == "symlink":
        (out / name).symlink_to(canary)
    else:
        os.link(canary, out / name)
    if name == "nodes.parquet":
        pytest.importorskip("pyarrow")
    if name.startswith("score."):
        pytest.importorskip("matplotlib")
    if name.startswith("nodes."):
        written = export_run(out, format="parquet" if name.endswith("parquet") else "jsonl")
    else:
        written = write_report(out).with_name(name)
    assert canary.read_bytes() == b"CANARY\n"
    assert not written.is_symlink() and written.stat().st_size > 0


def _resume(out: Path) -> None:
    from openmle.search import ResumeSpec, resume_search

    resume_search(
        out,
        ResumeSpec(**det_parts(), budget=Budget(steps=6)),
        quiet=True,
    )


@pytest.mark.parametrize("name", ["nodes", "requests", "final"])
def test_resume_refuses_a_run_dir_whose_subdirectory_links_outside(
    tmp_path: Path, name: str
) -> None:
    out = _run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    if (out / name).exists():
        (out / name).rename(tmp_path / f"real-{name}")
    (out / name).symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunDirError, match=rf"{name} is a symbolic link.*replace the link"):
        _resume(out)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "how", "refused"),
    [
        ("sessions.jsonl", "symlink", "symbolic link"),
        ("sessions.jsonl", "hardlink", "another hard link"),
        ("board.json.tmp", "symlink", None),  # the old temporary name: never opened now
        ("board.json", "symlink", None),  # replaced
    ],
)
def test_resume_never_appends_or_writes_through_a_link(
    tmp_path: Path, name: str, how: str, refused: str | None
) -> None:
    out = _run(tmp_path)
    canary = _canary(tmp_path)
    if (out / name).exists():
        (out / name).unlink()
    if how == "symlink":
        (out / name).symlink_to(canary)
    else:
        os.link(canary, out / name)
    if refused is None:
        _resume(out)
    else:
        with pytest.raises(RunDirError, match=refused):
            _resume(out)
    assert canary.read_bytes() == b"CANARY\n"


# ------------------------------------------------------------------------ what a journal holds
# An unkeyed journal can be edited and its chain recomputed by anyone: every value in it is
# checked before the report, the export or a resume computes with it.


def _edit_nodes(run: Path, **changes: Any) -> None:
    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in records:
            if r["event"] == "node":
                r["node"].update(changes)
        return records

    _rewrite(run, edit, chain=True)


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        ({"step": "x"}, "step 'x' is not an integer"),
        ({"step": 10**30}, "is not an integer in"),
        ({"step": -5}, "is not an integer in"),
        ({"generation": True}, "is not an integer in"),
        ({"node_id": "../../../outside/pwn"}, "is not a node id"),
        ({"node_id": 5}, "is not a node id"),
        ({"parent_ids": {"a": 1}}, "is not a list of node ids"),
        ({"parent_ids": ["/etc/passwd"]}, "is not a list of node ids"),
        ({"code": None}, "code is not a string"),
        ({"plan": {"x": 1}}, "plan is not a string"),
        ({"elapsed_s": -1e308}, "is not a finite number"),
        ({"exit_code": 10**40}, "is not a 64-bit integer"),
    ],
)
def test_a_journalled_node_of_the_wrong_shape_is_refused_in_one_line(
    tmp_path: Path, changes: dict[str, Any], refused: str
) -> None:
    from openmle.search import export_run

    out = _run(tmp_path)
    _edit_nodes(out, **changes)
    with pytest.raises(RunDirError, match=refused):
        RunDir.open(out).nodes()
    with pytest.raises(RunDirError, match="journal"):
        export_run(out, format="jsonl")


def test_a_number_that_overflows_to_infinity_is_refused(tmp_path: Path) -> None:
    out = _run(tmp_path)
    p = out / "journal.jsonl"
    p.write_text(p.read_text().replace('"uinteger":0', '"uinteger":1e999', 1))
    with pytest.raises(RunDirError, match="1e999 is not a finite number"):
        RunDir.open(out).nodes()


def test_the_report_is_bounded_by_the_nodes_not_by_the_numbers_they_claim(
    tmp_path: Path,
) -> None:
    """A generation of 10**9 drew 10**9 grid lines (MemoryError); scores at the float limits
    divided by zero or broke matplotlib."""
    from openmle.search import write_report

    out = _run(tmp_path)
    _edit_nodes(out, generation=10**9)
    html = write_report(out).read_text()
    assert html.count("gen 1000000000") == 1 and len(html) < 2_000_000

    def extreme(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        sign = 1.0
        for r in records:
            if r["event"] == "node" and r["node"]["score"] is not None:
                r["node"]["score"] = r["node"]["valid_score"] = sign * 1.7e308
                sign = -sign
        return records

    _rewrite(out, extreme, chain=True)
    assert "too large to plot" in write_report(out).read_text()


def test_parquet_export_of_text_with_a_lone_surrogate(tmp_path: Path) -> None:
    """A lone surrogate is legal JSON (``\\ud800``) but not UTF-8: export wrote a traceback."""
    pq = pytest.importorskip("pyarrow.parquet")
    from openmle.search import export_run

    out = _run(tmp_path)
    _edit_nodes(out, plan="plan \ud800 end")
    table = pq.read_table(export_run(out, format="parquet"))
    assert table.column("plan")[0].as_py() == "plan \\ud800 end"


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        ({"task": {"name": "toy", "higher_is_better": "false"}}, "task.higher_is_better"),
        ({"task": {"name": ["a"], "higher_is_better": True}}, "task.name"),
        ({"model": "x"}, "model is not an object"),
        ({"extra": [1]}, "extra is not an object"),
        ({"budget": "x"}, "budget is not an object"),
        ({"workers": "x"}, "workers is not an integer"),
    ],
)
def test_a_manifest_entry_of_the_wrong_type_is_refused_in_one_line(
    tmp_path: Path, changes: dict[str, Any], refused: str
) -> None:
    """``"higher_is_better": "false"`` read as true (bool of a string) and flipped the report;
    ``model: "x"`` or ``extra: [1]`` raised AttributeError out of report and resume."""
    out = _run(tmp_path)
    _set_manifest(out, **changes)
    with pytest.raises(RunDirError, match=refused):
        RunDir.open(out)
    proc = _cli("report", str(out))
    assert proc.returncode != 0 and refused in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------- the keyed journal seal
# A hash chain has no end marker: without the seal, a keyed run with its last lines removed read
# as a shorter run (fewer nodes, no final result), silently.


def _cut(run: Path, n: int) -> int:
    """Remove the journal's last ``n`` lines; the number of lines left."""
    p = run / "journal.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    left = max(0, len(lines) - n)
    p.write_bytes(b"".join(lines[:left]))
    return left


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_keyed_run_with_its_last_lines_removed_is_refused(keyed: Path, n: int) -> None:
    left = _cut(keyed, n)
    message = (
        f"journal.jsonl ends at line {left} but its seal names line {left + n}: lines were "
        "removed after they were written; the run cannot be trusted (restore it or start a "
        "new run)"
    )
    with pytest.raises(RunDirError) as caught:
        RunDir.open(keyed).nodes()
    assert str(caught.value).endswith(message) and "\n" not in str(caught.value)
    with pytest.raises(RunDirError, match="its seal names line"):
        _resume(keyed)


@pytest.mark.parametrize(
    "command",
    [["export"], ["report"], ["resume", "--model", "offline-numpy", "--sandbox", "local"]],
)
def test_export_report_and_resume_refuse_a_cut_keyed_journal(
    keyed: Path, command: list[str]
) -> None:
    _cut(keyed, 3)
    proc = _cli(command[0], str(keyed), *command[1:], key=KEY)
    assert proc.returncode != 0 and "its seal names line" in proc.stderr, proc.stderr[-2000:]


def test_lines_after_the_sealed_head_are_a_kill_not_a_forgery(keyed: Path) -> None:
    """kill -9 between the journal's append and the seal's rewrite: a full line (or a torn one)
    after the sealed head still chains, so the run reads and resumes."""
    early = (keyed / "journal.seal").read_bytes()
    _resume(keyed)  # 4 -> 6 steps: more lines, a new seal
    assert (keyed / "journal.seal").read_bytes() != early
    (keyed / "journal.seal").write_bytes(early)  # as if killed before the reseal
    with (keyed / "journal.jsonl").open("ab") as fh:
        fh.write(b'{"event":"node","no')  # and mid-write
    assert len(RunDir.open(keyed).nodes()) == 6
    from openmle.search import ResumeSpec, resume_search

    resume_search(keyed, ResumeSpec(**det_parts(), budget=Budget(steps=7)), quiet=True)
    rd = RunDir.open(keyed)
    assert len(rd.nodes()) == 7 and rd.final_result() is not None
    _cut(keyed, 1)
    with pytest.raises(RunDirError, match="its seal names line"):
        RunDir.open(keyed).nodes()


def _seal(run: Path, **changes: Any) -> None:
    p = run / "journal.seal"
    seal = json.loads(p.read_text())
    seal.update(changes)
    p.write_text(json.dumps(seal))


def test_an_edited_or_forged_seal_is_refused(keyed: Path) -> None:
    honest = (keyed / "journal.seal").read_text()
    seal = json.loads(honest)
    lines = (keyed / "journal.jsonl").read_bytes().splitlines()
    assert seal["lines"] == len(lines) and seal["chain"] == json.loads(lines[-1])["chain"]
    _cut(keyed, 3)
    shorter = json.loads((keyed / "journal.jsonl").read_bytes().splitlines()[-1])["chain"]
    # the seal moved back to the cut journal's head, its MAC kept
    _seal(keyed, lines=seal["lines"] - 3, chain=shorter)
    with pytest.raises(RunDirError, match="seal's HMAC does not match"):
        RunDir.open(keyed).nodes()
    # ... with a MAC anyone can compute (no key), or a chain value as its MAC
    for mac in (
        hashlib.sha256(f"{seal['lines'] - 3}\n{shorter}".encode()).hexdigest(),
        shorter,
        "0" * 64,
    ):
        _seal(keyed, mac=mac)
        with pytest.raises(RunDirError, match="seal's HMAC does not match"):
            RunDir.open(keyed).nodes()
    for chain in ("\ud800" * 64, "a" * 10**3, 7):  # not a chain value: one line, no crash
        _seal(keyed, chain=chain)
        with pytest.raises(RunDirError, match="seal's HMAC does not match"):
            RunDir.open(keyed).nodes()
    (keyed / "journal.seal").write_text("not json")
    with pytest.raises(RunDirError, match="seal's HMAC does not match"):
        RunDir.open(keyed).nodes()
    (keyed / "journal.seal").unlink()
    with pytest.raises(RunDirError, match=r"journal\.seal is missing"):
        RunDir.open(keyed).nodes()


def test_a_seal_from_another_run_is_refused(keyed: Path, tmp_path: Path) -> None:
    other = _run(tmp_path, "b", steps=2)  # same key, another manifest (created_at, steps)
    (keyed / "journal.seal").write_bytes((other / "journal.seal").read_bytes())
    with pytest.raises(RunDirError, match="seal's HMAC does not match"):
        RunDir.open(keyed).nodes()


def test_a_seal_that_is_a_link_or_huge_is_refused(keyed: Path, tmp_path: Path) -> None:
    seal = keyed / "journal.seal"
    (tmp_path / "real.seal").write_bytes(seal.read_bytes())
    seal.unlink()
    seal.symlink_to(tmp_path / "real.seal")
    with pytest.raises(RunDirError, match="symbolic link"):
        RunDir.open(keyed).nodes()
    seal.unlink()
    seal.write_bytes(b" " * (1 << 20) + (tmp_path / "real.seal").read_bytes())
    with pytest.raises(RunDirError, match="limit"):
        RunDir.open(keyed).nodes()
    seal.unlink()
    os.mkfifo(seal)
    with pytest.raises(RunDirError, match="not a regular file"):
        RunDir.open(keyed).nodes()


def _as_schema_3(run: Path) -> None:
    """Rewrite a keyed run as a keyed run of schema 3 (before the seal) would have been
    written: the chain recomputed with the key from the schema 3 manifest, no seal."""
    m = json.loads((run / "manifest.json").read_text())
    m["schema_version"] = 3
    (run / "manifest.json").write_text(json.dumps(m))
    body = {k: v for k, v in m.items() if k != "journal"}
    line = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    prev = hmac.new(KEY.encode(), b"manifest\n" + line.encode(), hashlib.sha256).hexdigest()
    out = []
    for raw in (run / "journal.jsonl").read_text().splitlines():
        r = json.loads(raw)
        r.pop("chain")
        data = json.dumps(r, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
        mac = hmac.new(KEY.encode(), prev.encode() + b"\n" + data.encode(), hashlib.sha256)
        prev = mac.hexdigest()
        out.append(json.dumps({**r, "chain": prev}) + "\n")
    (run / "journal.jsonl").write_text("".join(out))
    (run / "journal.seal").unlink()


def test_a_schema_3_keyed_run_reads_without_a_seal_and_gets_one_on_resume(keyed: Path) -> None:
    _as_schema_3(keyed)
    assert len(RunDir.open(keyed).nodes()) == 4  # as before the seal
    _resume(keyed)
    rd = RunDir.open(keyed)
    assert len(rd.nodes()) == 6 and rd.manifest["schema_version"] == 3
    assert (keyed / "journal.seal").is_file()
    _cut(keyed, 2)  # its seal, once written, is verified
    with pytest.raises(RunDirError, match="its seal names line"):
        RunDir.open(keyed).nodes()


def test_a_downgrade_to_the_unsealed_schema_is_refused(keyed: Path) -> None:
    """Schema 4 -> 3 in the manifest, the seal deleted, the last lines removed: the manifest's
    HMAC seeds the chain, so the first line no longer chains."""
    _cut(keyed, 3)
    _set_manifest(keyed, schema_version=3)
    (keyed / "journal.seal").unlink(missing_ok=True)
    with pytest.raises(RunDirError, match="line 1 fails the journal's hash chain"):
        RunDir.open(keyed).nodes()
    _cut(keyed, 100)  # no line left to verify the manifest with
    with pytest.raises(RunDirError, match=r"is empty and journal\.seal is missing"):
        RunDir.open(keyed).nodes()
