"""Render docs/reference/formats.md: the files and wire formats openmle reads and writes.

The tables come from the code: task.toml keys from the package loader's key table, record
fields from each value's ``to_dict`` and its docstring's ``Args`` section, manifest and journal
keys from the dict literals the run directory writes, the job service's routes, request fields
and job view from the service's source. ``scripts/gen_reference.py`` writes the page;
``tests/test_docs.py`` fails when it is out of date.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import attrs


def _cell(text: str) -> str:
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?(\w+)`", r"`\1`", text)  # :class:`~a.B` -> `B`
    text = re.sub(r"``(.+?)``", r"`\1`", text)
    return " ".join(text.split()).replace("|", "\\|")


def _source_tree(obj: Any) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(obj)))


def _class_tree(module: Any, name: str) -> ast.AST:
    """A class's definition, found by name in its module's source.

    (``inspect.getsource`` cannot find a class whose ``__module__`` names the public module
    or that attrs rebuilt.)
    """
    tree = ast.parse(inspect.getsource(module))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _literal_block(doc: str, heading: str) -> str:
    """The indented block after the line ending with ``heading::`` in a docstring."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith(f"{heading}::"))
    block: list[str] = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip("\n")


def _arg_docs(cls: type) -> dict[str, str]:
    """``name: description`` entries of the class docstring's ``Args:`` section."""
    doc = inspect.getdoc(cls) or ""
    if "Args:" not in doc:
        return {}
    out: dict[str, str] = {}
    current: list[str] = []
    for line in doc.split("Args:", 1)[1].splitlines():
        if line and not line.startswith(" "):
            break
        m = re.match(r"^ {4}([\w, ]+?):\s+(.*)$", line)
        if m:
            current = [n.strip() for n in m[1].split(",")]
            for name in current:
                out[name] = m[2].strip()
        elif line.strip() and current:
            for name in current:
                out[name] += " " + line.strip()
    # one entry may describe several fields: "code: the program; plan: the model's plan."
    for name, text in list(out.items()):
        first, *rest = re.split(r";\s+(?=\w+: )", text)
        out[name] = first
        for part in rest:
            other, _, desc = part.partition(": ")
            out.setdefault(other, desc)
    return out


def _to_dict_keys(cls: type) -> list[str]:
    """The keys ``cls.to_dict`` writes: its returned dict literal, else the attrs fields."""
    tree = _source_tree(cls.to_dict)  # type: ignore[attr-defined]
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    return [f.name for f in attrs.fields(cls)]


def _record_table(cls: type) -> list[str]:
    types = {f.name: str(f.type) for f in attrs.fields(cls)}
    docs = _arg_docs(cls)
    rows = ["| field | type | what |", "| --- | --- | --- |"]
    for key in _to_dict_keys(cls):
        kind = types.get(key, "")
        rows.append(f"| `{key}` | `{_cell(kind)}` | {_cell(docs.get(key, ''))} |")
    return [*rows, ""]


def _dicts_with(tree: ast.AST, key: str) -> Iterator[ast.Dict]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == key for k in node.keys
        ):
            yield node


def _keys(node: ast.Dict, prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in zip(node.keys, node.values, strict=True):
        if not isinstance(k, ast.Constant):
            continue
        out.append(f"{prefix}{k.value}")
        if isinstance(v, ast.Dict):
            out += _keys(v, f"{prefix}{k.value}.")
    return out


def _journal_events() -> list[tuple[str, list[str]]]:
    """``(event, keys)`` for every record ``RunDir`` appends to journal.jsonl."""
    rundir = importlib.import_module("openmle.search._rundir")
    events: list[tuple[str, list[str]]] = []
    for node in ast.walk(_class_tree(rundir, "RunDir")):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_append"
            and node.args
            and isinstance(node.args[0], ast.Dict)
        ):
            keys = _keys(node.args[0])
            event = next(
                v.value
                for k, v in zip(node.args[0].keys, node.args[0].values, strict=True)
                if isinstance(k, ast.Constant)
                and k.value == "event"
                and isinstance(v, ast.Constant)
            )
            events.append((event, [k for k in keys if k != "event"]))
    return events


def _body_fields() -> list[str]:
    """Top-level request fields ``parse_submit`` reads, in order."""
    payload = importlib.import_module("openmle.service._payload")
    seen: list[str] = []
    for node in ast.walk(_source_tree(payload.parse_submit)):
        if not isinstance(node, ast.Call):
            continue
        args = list(node.args)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            args = [node.func.value, *args]  # body.get("key") reads like helper(body, "key")
        if (
            len(args) >= 2
            and isinstance(args[0], ast.Name)
            and args[0].id == "body"
            and isinstance(args[1], ast.Constant)
            and args[1].value not in seen
        ):
            seen.append(args[1].value)
    return sorted(seen, key=lambda k: (k != "code", k))


def _routes() -> list[tuple[str, str, str]]:
    """``(method, path, handler)`` of the job service's routes (its ``Route`` calls)."""
    app = importlib.import_module("openmle.service._app")
    out: list[tuple[str, str, str]] = []
    for node in ast.walk(_source_tree(app)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Route"
        ):
            path = ast.literal_eval(node.args[0])
            arg = node.args[1]
            handler = (
                arg.id
                if isinstance(arg, ast.Name)
                else arg.attr
                if isinstance(arg, ast.Attribute)
                else ""
            )
            methods = next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "methods")
            out += [(m, path, handler) for m in methods]
    return out


def render_formats() -> str:
    """The formats page's Markdown."""
    package = importlib.import_module("openmle.gym._package")
    rundir = importlib.import_module("openmle.search._rundir")
    wire = importlib.import_module("openmle._wire")
    loop = importlib.import_module("openmle.search._loop")
    types = importlib.import_module("openmle._types")
    doc_package = inspect.getdoc(package) or ""
    doc_rundir = inspect.getdoc(rundir) or ""
    lines = [
        "# File and wire formats",
        "",
        "Generated by `scripts/gen_reference.py` (`scripts/gen_formats.py`) from the code that "
        "reads and writes each format: key tables from the loaders, record fields from each "
        "value's `to_dict` and docstring, manifest and journal keys from the dicts the run "
        "directory writes. JSON everywhere is UTF-8; numbers that are not finite are never "
        "written.",
        "",
        "## Task package",
        "",
        "A directory (see [task packages](../how-to/task-packages.md)). Layout:",
        "",
        "```text",
        _literal_block(doc_package, "Layout of a package"),
        "```",
        "",
        "### `task.toml`",
        "",
        "Optional; an unknown key or a value of the wrong type is refused with the key's name.",
        "",
        "| key | type |",
        "| --- | --- |",
    ]
    lines += [f"| `{k}` | `{t.__name__}` |" for k, t in package._KEYS.items()]
    lines += [
        "",
        "`[resources]` takes `cpus`, `gpus` and `memory_mb`. Every key, with its default:",
        "",
        "```toml",
        _literal_block(doc_package, "``task.toml`` keys (all optional)"),
        "```",
        "",
        "## Run directory",
        "",
        "Written by `openmle search` / `run_search(run_dir=...)`, continued by `resume`:",
        "",
        "```text",
        _literal_block(doc_rundir, "Layout"),
        "```",
        "",
        "With node summaries on (`--summaries`), `summaries/<node_id>.json` caches each "
        'summary as `{"node_id": ..., "summary": ...}`.',
        "",
        "### `manifest.json`",
        "",
        "Written once when the run starts. Keys (nested keys dotted):",
        "",
    ]
    manifest = next(_dicts_with(_source_tree(rundir.RunDir.create), "schema_version"))
    lines += [", ".join(f"`{k}`" for k in _keys(manifest)), ""]
    lines += [
        "### `journal.jsonl`",
        "",
        "One JSON object per line, appended and fsync'd in the order the search core saw them. "
        "Each record has an `event`:",
        "",
        "| event | keys |",
        "| --- | --- |",
    ]
    lines += [
        f"| `{event}` | {', '.join(f'`{k}`' for k in keys)} |" for event, keys in _journal_events()
    ]
    volatile = ", ".join(f"`{k}`" for k in sorted(rundir.VOLATILE_KEYS))
    if hasattr(rundir, "CHAIN_KEY"):
        chain_doc = "the hash chain, verified on every read"
        lines += [
            "",
            f"Every record of a chained run also carries `{rundir.CHAIN_KEY}`, {chain_doc}: "
            "`sha256(previous chain value + newline + the record's JSON line without this key)` "
            "in hex; the first record chains from the empty string. A run written with a "
            f"journal key (`{getattr(rundir, 'JOURNAL_KEY_ENV', 'OPENMLE_JOURNAL_KEY')}`, "
            "manifest `schema_version` 4 and `journal.key_id`) chains with HMAC-SHA256 under "
            "that key instead, the first record from an HMAC of the manifest (without its "
            "`journal` entry); without the key the chain catches accidents only.",
        ]
    if hasattr(rundir, "SEAL"):
        lines += [
            "",
            f"### `{rundir.SEAL}`",
            "",
            "A keyed run's seal of the journal's head: one JSON object "
            '`{"lines": N, "chain": ..., "mac": ...}`, rewritten atomically (a new file renamed '
            "over it, no link followed, fsync'd) after each batch of journal lines is fsync'd, "
            "once per batch, not per line. `lines` is the number of journal lines written, "
            "`chain` the chain value of the last one, and `mac` an HMAC-SHA256 under the "
            'journal key of `"openmle journal seal\\n"` + the manifest\'s HMAC + `"\\n"` + '
            '`N` + `"\\n"` + `chain`: a domain of its own, so no chain value in the journal '
            "can stand in for it. On every read (resume, report, export, replay) the seal's "
            "MAC is verified (the file read bounded, at most "
            f"{rundir.SEAL_MAX_BYTES} bytes, no link followed) and the journal must reach the "
            "sealed head: line `N` with that chain value. Lines after it are accepted (a "
            "process killed between the journal append and the seal rewrite; they still "
            "chain); a journal that ends before it is refused (`RunDirError`: lines were "
            "removed after they were written). A schema 4 run without its seal is refused; "
            "keyed runs of schema 3 (written before the seal) are read without one and get "
            "one when resumed (verified from then on while it is there, and an empty schema 3 "
            "journal without a seal is refused: no line verifies its manifest). The manifest's "
            "HMAC covers `schema_version`, so a schema 4 run cannot be passed off as schema 3. "
            "The seal names the newest head; a seal copied from an earlier state of the same "
            "run still verifies, so keep copies of a run as safe as the run. Unkeyed runs have "
            "no seal: without a key anyone can rewrite the whole directory, chain included.",
        ]
    lines += [
        "",
        f"Wall-clock fields ({volatile}) differ between identical runs; "
        "`journal_fingerprint` drops them.",
        "",
        "A `proposal` record's `proposal`:",
        "",
        *_record_table(loop.Proposal),
        "A `node` record's `node`:",
        "",
        *_record_table(loop.Node),
        "A `final` record's `result` (a `RunResult`, as every sandbox returns it):",
        "",
        *_record_table(types.RunResult),
        "## Job service (HTTP)",
        "",
        "`openmle serve` (see [the job service](../how-to/scale-out-with-the-job-service.md)); "
        "JSON bodies; every request carries an `X-API-Key` header unless the service runs "
        "with `--no-auth`.",
        "",
        "| method | path | handler |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{m}` | `{p}` | `{h}` |" for m, p, h in _routes()]
    lines += [
        "",
        "### Submit: `POST /api/v1/jobs`",
        "",
        "Request fields (the released clients' names; unknown fields are ignored): "
        + ", ".join(f"`{k}`" for k in _body_fields())
        + ". A field of the wrong shape is refused with 422 naming it; a path outside the "
        "service's task roots with 400.",
        "",
        "The service turns a request into a `Job` (`timeout` or `timeout_s` gives `timeout_s`, "
        "`eval_split` or `split` gives `split`, `environment` gives `env`, `data_dir` or `task` "
        "gives `task`); a job's `result.run_result` is the `RunResult` above:",
        "",
        *_record_table(types.Job),
        "### A job: `GET /api/v1/jobs/{job_id}`",
        "",
        "Keys (`result` is null until the job ends): "
        + ", ".join(
            f"`{k}`" for k in _keys(next(_dicts_with(_source_tree(wire.encode_job_view), "job_id")))
        )
        + ", and in `result`: "
        + ", ".join(
            f"`{k}`"
            for k in _keys(next(_dicts_with(_source_tree(wire.encode_job_view), "run_log")))
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


PAGE: Callable[[], str] = render_formats
