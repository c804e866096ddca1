"""The CLI's boundary (issue 14): the real ``openmle`` executable in a subprocess, its stderr
and exit codes; model failures against a real local HTTP server started by the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from tests.unit.cli._fake_openai import fake_openai

import openmle
from openmle._cli._search import load_prices, parse_budget
from openmle.backends import OpenAIModel
from openmle.errors import InvalidArgument, ModelAuthError, ModelNotFoundError
from openmle.search import PriceTable

SRC = str(Path(openmle.__file__).parents[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENMLE_DEBUG", "OPENAI_API_KEY"}}
    return {**env, "PYTHONPATH": SRC, **extra}


def openmle_cli(
    *args: str, cwd: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m openmle ARGS`` in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "openmle", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(**env),
        timeout=timeout,
        check=False,
    )


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("openmle: error: "), proc.stderr
    return lines[0]


# ------------------------------------------------------------------- 1: one error, exit codes


@pytest.mark.parametrize("task", ["tabular-binaryy", "./nope"])
def test_unknown_task_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, task: str) -> None:
    proc = openmle_cli("search", "--task", task, "--out", "r1", cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert repr(task) in line and "tabular-binary" in line  # names the bundled tasks
    assert not (tmp_path / "r1").exists()
    assert proc.stdout == ""  # no run header either


def test_debug_flag_and_environment_print_the_traceback(tmp_path: Path) -> None:
    flag = openmle_cli("--debug", "search", "--task", "nope", cwd=tmp_path)
    env = openmle_cli("search", "--task", "nope", cwd=tmp_path, OPENMLE_DEBUG="1")
    for proc in (flag, env):
        assert proc.returncode == 2
        assert "Traceback" in proc.stderr and "InvalidArgument" in proc.stderr
        assert proc.stderr.rstrip().splitlines()[-1].startswith("openmle: error: --task 'nope'")


def test_an_exception_group_of_openmle_errors_is_unwrapped() -> None:
    """The CLI's guard prints each error of a group once and picks the exit code."""
    from openmle._cli._common import run_guarded
    from openmle.errors import RunDirError

    def usage() -> int:
        raise ExceptionGroup("g", [ExceptionGroup("h", [InvalidArgument("bad --task")])])

    def failure() -> int:
        raise ExceptionGroup("g", [InvalidArgument("a"), RunDirError("b")])

    assert run_guarded(usage) == 2
    assert run_guarded(failure) == 1


# ------------------------------------------------------------------ 2: messages name the flags


@pytest.mark.parametrize(
    ("args", "says", "not_says"),
    [
        (["--budget", "steps=0"], "--budget steps=", "Budget."),
        (["--budget", "steps=2.5"], "--budget steps=", "Budget."),
        (["--budget", "tokens=-1"], "--budget tokens=", "Budget."),
        (["--timeout", "-5"], "--timeout", "SearchConfig"),
        (["--workers", "0"], "--workers", "workers=0"),
        (["--steps", "0"], "--steps", "Budget."),
        (["--steps", "3", "--budget", "steps=4"], "--steps 3 and --budget steps=4", "Budget."),
    ],
)
def test_bad_values_name_the_flag_and_exit_2_before_the_header(
    tmp_path: Path, args: list[str], says: str, not_says: str
) -> None:
    proc = openmle_cli("search", "--task", "tabular-binary", *args, "--out", "r", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and not_says not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "openmle search: task" not in proc.stdout  # no run header
    assert not (tmp_path / "r").exists()


def test_steps_is_the_budget_step_cap() -> None:
    assert parse_budget("", steps=7).steps == 7
    assert parse_budget("wall_s=60", steps=7).wall_s == 60.0
    with pytest.raises(InvalidArgument, match="both set the step cap"):
        parse_budget("steps=3", steps=7)


def test_search_help_documents_steps_key_and_exit_codes(tmp_path: Path) -> None:
    out = openmle_cli("search", "--help", cwd=tmp_path).stdout
    assert "--steps" in out and "--api-key-file" in out and "$OPENAI_API_KEY" in out
    assert "--prices" in out
    assert "--debug" in openmle_cli("--help", cwd=tmp_path).stdout


# ------------------------------------------------------------- 3: task validate, broken tasks


def test_task_validate_missing_path_is_usage_2_findings_are_1(tmp_path: Path) -> None:
    assert openmle_cli("task", "validate", str(tmp_path / "nope"), cwd=tmp_path).returncode == 2
    empty = tmp_path / "emptytask"
    empty.mkdir()
    proc = openmle_cli("task", "validate", str(empty), "--no-smoke-test", cwd=tmp_path)
    assert proc.returncode == 1
    metric = [ln for ln in proc.stdout.splitlines() if "utils/metric.py" in ln]
    assert len(metric) == 1, proc.stdout  # the metric finding once
    assert "id column" not in proc.stdout  # no warning about a file it said is missing
    assert proc.stdout.count("is missing.") == 5  # the five data files


def test_search_on_a_broken_package_lists_every_finding(tmp_path: Path) -> None:
    empty = tmp_path / "emptytask"
    empty.mkdir()
    proc = openmle_cli("search", "--task", str(empty), "--out", "r", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("openmle: error: --task")
    for name in ("description.txt", "train.csv", "test.csv", "sample_submission.csv"):
        assert f"{name}: is missing" in proc.stderr
    assert "test_answer.csv: is missing" in proc.stderr
    assert proc.stderr.count("utils/metric.py") == 1
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------ 4: interrupt


#: ``python -c`` this, then the CLI's arguments: the CLI with SIGINT ignored, as a background
#: job of a shell script starts (its ``&`` ignores SIGINT).
SIGINT_IGNORED = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "sys.argv[0] = 'openmle'; runpy.run_module('openmle', run_name='__main__')"
)


@pytest.mark.parametrize(
    ("signum", "name", "start"),
    [
        (signal.SIGINT, "Ctrl-C", ["-m", "openmle"]),
        (signal.SIGTERM, "SIGTERM", ["-m", "openmle"]),
        # SIGTERM used to be re-sent as SIGINT only, which an ignored SIGINT swallowed
        (signal.SIGTERM, "SIGTERM", ["-c", SIGINT_IGNORED]),
    ],
    ids=["ctrl-c", "sigterm", "sigterm-with-sigint-ignored"],
)
def test_ctrl_c_and_sigterm_say_how_to_resume(
    tmp_path: Path, signum: int, name: str, start: list[str]
) -> None:
    with fake_openai(delay_s=60.0) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                *start,
                "search",
                "--task",
                "tabular-binary",
                "--model",
                f"openai:{server.base_url}/v1#served/model-a",
                "--steps",
                "2",
                "--out",
                "run dir",
            ],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not any(p == "/v1/chat/completions" for _, p, _ in server.requests):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, err
    assert f"openmle: interrupted ({name})" in err
    assert "openmle resume 'run dir'" in err
    assert "Traceback" not in err


# ------------------------------------------------------------------------------- 5: the model


def _search_with(server_url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return openmle_cli(
        "search",
        "--task",
        "tabular-binary",
        "--model",
        server_url,
        "--steps",
        "2",
        "--workers",
        "1",
        "--out",
        "r",
        *extra,
        cwd=tmp_path,
    )


def test_wrong_key_is_fatal_before_the_first_step(tmp_path: Path) -> None:
    with fake_openai(key="sk-right") as server:
        proc = _search_with(f"openai:{server.base_url}/v1#served/model-a", tmp_path)
        chats = [r for r in server.requests if r[0] == "POST"]
    assert proc.returncode == 1
    line = _one_error_line(proc)
    assert "Incorrect API key provided" in line and "OPENAI_API_KEY" in line
    assert chats == []  # refused at the model list, no completion tried
    assert not (tmp_path / "r").exists()


def test_api_key_file_is_sent(tmp_path: Path) -> None:
    key = tmp_path / "key.txt"
    key.write_text("sk-right\n")
    with fake_openai(key="sk-right") as server:
        proc = _search_with(
            f"openai:{server.base_url}/v1#served/model-a", tmp_path, "--api-key-file", str(key)
        )
    assert "Incorrect API key" not in proc.stderr
    assert "no node succeeded" in proc.stderr  # it ran: the server's answers hold no code


@pytest.mark.parametrize(
    ("suffix", "code", "named"),
    [
        ("/v1#gpt-17", 1, "'gpt-17'"),  # a wrong model id
        ("/v1", 2, "#MODEL"),  # no model name, several served
    ],
)
def test_an_unsettled_model_lists_the_served_models(
    tmp_path: Path, suffix: str, code: int, named: str
) -> None:
    with fake_openai(models=["served/a", "served/b"]) as server:
        proc = _search_with(f"openai:{server.base_url}{suffix}", tmp_path)
    assert proc.returncode == code
    line = _one_error_line(proc)
    assert named in line and "served/a" in line and "served/b" in line


def test_base_url_without_v1_says_so(tmp_path: Path) -> None:
    with fake_openai() as server:
        proc = _search_with(f"openai:{server.base_url}#served/model-a", tmp_path)
        chats = [r for r in server.requests if r[0] == "POST"]
    assert proc.returncode == 1
    assert "/v1" in _one_error_line(proc)
    assert len(chats) <= 1  # one probe, no retries


def test_no_model_name_uses_the_only_served_model(tmp_path: Path) -> None:
    with fake_openai(models=["only/one"]) as server:
        proc = _search_with(f"openai:{server.base_url}/v1", tmp_path)
        used = {b.get("model") for m, _, b in server.requests if m == "POST"}
    assert used == {"only/one"}
    assert "(model only/one)" in proc.stdout


def test_a_run_where_nothing_succeeded_exits_1_and_says_so(tmp_path: Path) -> None:
    with fake_openai() as server:
        proc = _search_with(f"openai:{server.base_url}/v1#served/model-a", tmp_path)
    assert proc.returncode == 1
    assert "best node" in proc.stdout and "none succeeded" in proc.stdout
    assert "openmle: error: no node succeeded (2 tried)" in proc.stderr
    # 6: the report says it in words, and matplotlib has nothing to warn about
    assert "No artists with labels" not in proc.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert "No node succeeded" in html


def test_usd_budget_needs_prices(tmp_path: Path) -> None:
    proc = openmle_cli("search", "--task", "tabular-binary", "--budget", "usd=5", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--prices" in _one_error_line(proc)
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"served/model-a": [1.0, 2.0]}))
    budget = parse_budget("usd=5", prices=load_prices(str(prices)))
    assert budget.usd == 5.0 and budget.prices == PriceTable(prices={"served/model-a": (1, 2)})
    toml = tmp_path / "p.toml"
    toml.write_text('"*" = [0.5, 1.5]\n')
    assert load_prices(str(toml)).prices["*"] == (0.5, 1.5)
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": "cheap"}')
    with pytest.raises(InvalidArgument, match="--prices"):
        load_prices(str(bad))


def test_server_reported_cost_and_the_model_list() -> None:
    async def go(url: str) -> tuple[float | None, list[str]]:
        from openmle import Message, ModelRequest

        m = OpenAIModel(model="served/model-a", base_url=f"{url}/v1")
        try:
            r = await m.complete(ModelRequest(messages=(Message(role="user", content="hi"),)))
            return r.cost_usd, await m.list_models()
        finally:
            await m.aclose()

    with fake_openai(cost=0.0125) as server:
        cost, served = anyio.run(go, server.base_url)
    assert cost == 0.0125 and served == ["served/model-a"]


def test_preflight_raises_the_first_steps_error_at_once() -> None:
    async def check(model: OpenAIModel) -> None:
        try:
            await model.preflight()
        finally:
            await model.aclose()

    with fake_openai(key="k") as server:
        with pytest.raises(ModelAuthError, match="Incorrect API key"):
            anyio.run(check, OpenAIModel(model="served/model-a", base_url=f"{server.base_url}/v1"))
        good = OpenAIModel(model="served/model-a", base_url=f"{server.base_url}/v1", api_key="k")
        anyio.run(check, good)
        with pytest.raises(ModelNotFoundError, match="/v1"):
            anyio.run(check, OpenAIModel(model="x", base_url=server.base_url, api_key="k"))
