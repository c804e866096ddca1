"""Core values shared by every layer: operators, outcomes, task metadata, jobs and results.

Every value here is a frozen ``attrs`` class (or a string enum, which is its own JSON form)
with validators. Only the values that cross processes, HTTP and run directories have
``to_dict`` and ``from_dict`` that round-trip through JSON exactly: :class:`Resources`,
:class:`Job`, :class:`RunResult` and :class:`Selection` (journalled with each proposal). The
others stay in one process and have no JSON form (:class:`TaskMeta` is read from task metadata
with :meth:`TaskMeta.from_mapping`).

Departures from the released system: the released code mixes HTTP status codes, status strings
and reward categories to say how a run ended; here one :class:`Outcome` enum is the whole
feedback taxonomy, and infrastructure failures (``INFRA_ERROR``) are kept apart from program
failures (reference bug B5).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
from attrs import field, frozen

from openmle._validation import check_choice, check_positive, fail, optional_finite, str_tuple
from openmle.errors import InvalidArgument, InvalidArgumentType

__all__ = [
    "Candidate",
    "Job",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Operator",
    "Outcome",
    "Resources",
    "RunResult",
    "Selection",
    "Split",
    "TaskMeta",
    "Usage",
]


class Operator(enum.StrEnum):
    """The four program operators."""

    DRAFT = "draft"
    IMPROVE = "improve"
    DEBUG = "debug"
    CROSSOVER = "crossover"

    @property
    def n_parents(self) -> int:
        """How many parents the operator takes: 0 (Draft), 1 (Improve, Debug) or 2 (Crossover)."""
        return {"draft": 0, "improve": 1, "debug": 1, "crossover": 2}[self.value]


class Outcome(enum.StrEnum):
    """How a candidate run ended: the feedback taxonomy shared by Debug, cards and rewards."""

    SUCCESS = "success"
    """The program ran and its submission graded to a finite score."""
    RUNTIME_ERROR = "runtime_error"
    """The program exited non-zero (an exception, a crash, a signal other than ours)."""
    MISSING_CODE = "missing_code"
    """The model's response held no program."""
    MISSING_SUBMISSION = "missing_submission"
    """The program exited 0 but wrote no ``submission.csv``."""
    INVALID_SUBMISSION = "invalid_submission"
    """The submission breaks the task's format, or grading failed or gave a non-finite score."""
    TIMEOUT = "timeout"
    """The program ran past its wall-clock limit and was killed."""
    OOM = "oom"
    """The program ran out of memory."""
    INFRA_ERROR = "infra_error"
    """The sandbox or service failed, not the program. Never rewarded, never a score."""
    REJECTED = "rejected"
    """The reward-hacking guard refused the program before or after it ran."""

    @property
    def is_success(self) -> bool:
        """True for :attr:`SUCCESS` only."""
        return self is Outcome.SUCCESS

    @property
    def is_infra(self) -> bool:
        """True when the harness, not the program, is to blame (:attr:`INFRA_ERROR`)."""
        return self is Outcome.INFRA_ERROR

    @property
    def is_program_failure(self) -> bool:
        """True when the program (or the model's response) is to blame."""
        return not (self.is_success or self.is_infra)


class Split(enum.StrEnum):
    """Which answers a score was computed against.

    ``VALID`` is a deterministic hold-out of the public training data, used by search;
    ``TEST`` is the task's private answers, used once for the final grade.
    """

    VALID = "valid"
    TEST = "test"


def _check_bound(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    name = f"TaskMeta.{attribute.name}"
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType(
            f"Expected a number or None but got {name}={value!r} (type={type(value).__name__})"
        )
    if math.isnan(value):
        raise fail("a number (not NaN) or None", name, value)
    lo_name = {"theoretical_max": "theoretical_min", "leaderboard_max": "leaderboard_min"}.get(
        attribute.name
    )
    lo = getattr(instance, lo_name) if lo_name else None
    if lo is not None and lo > value:
        raise InvalidArgument(
            f"TaskMeta.{lo_name}={lo!r} is above {name}={value!r}; "
            f"swap them or fix the task metadata"
        )


def _to_float(value: float | None) -> float | None:
    """Turn ints into floats; anything else is left for the validator to judge."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@frozen(kw_only=True)
class TaskMeta:
    """Score direction and optional static bounds of a task, in raw score units.

    Args:
        higher_is_better: direction of the metric (True for accuracy, False for RMSE/log loss).
        theoretical_min, theoretical_max: limits the metric can never cross (e.g. 0 and 1).
        leaderboard_min, leaderboard_max: worst and best scores seen on a public leaderboard.
        name: optional task name.

    Raises:
        InvalidArgument: a ``*_min`` above its ``*_max``, or a NaN bound.
    """

    higher_is_better: bool = field(default=True)
    theoretical_min: float | None = field(default=None, converter=_to_float, validator=_check_bound)
    theoretical_max: float | None = field(default=None, converter=_to_float, validator=_check_bound)
    leaderboard_min: float | None = field(default=None, converter=_to_float, validator=_check_bound)
    leaderboard_max: float | None = field(default=None, converter=_to_float, validator=_check_bound)
    name: str | None = None

    @higher_is_better.validator
    def _check_hib(self, attribute: attrs.Attribute[bool], value: object) -> None:
        if not isinstance(value, bool):
            raise InvalidArgumentType(
                f"Expected bool but got TaskMeta.higher_is_better={value!r} "
                f"(type={type(value).__name__}); use true/false"
            )

    def signed(self, score: float) -> float:
        """``score`` in higher-is-better units: ``score``, or ``-score`` when lower is better.

        The one place the direction flip is written; compare signed scores with ``>``.
        """
        return score if self.higher_is_better else -score

    def better(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than score ``b`` for this task."""
        return self.signed(a) > self.signed(b)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> TaskMeta:
        """Build from a mapping with the golden files' keys.

        Recognised keys: ``higher_is_better`` (missing or None means True), ``theoretical_min``,
        ``theoretical_max``, ``leaderboard_min``, ``leaderboard_max``, ``task_name`` or ``name``.
        Other keys (for example ``dynamic_bound_*_signed``) are ignored.
        """
        if not isinstance(mapping, Mapping):
            raise InvalidArgumentType(
                f"Expected a mapping but got metadata={mapping!r} (type={type(mapping).__name__})"
            )
        hib = mapping.get("higher_is_better", True)
        return cls(
            higher_is_better=True if hib is None else hib,
            theoretical_min=mapping.get("theoretical_min"),
            theoretical_max=mapping.get("theoretical_max"),
            leaderboard_min=mapping.get("leaderboard_min"),
            leaderboard_max=mapping.get("leaderboard_max"),
            name=mapping.get("task_name", mapping.get("name")),
        )

    def to_mapping(self) -> dict[str, Any]:
        """The inverse of :meth:`from_mapping` (``task_name`` key for the name)."""
        out: dict[str, Any] = {"higher_is_better": self.higher_is_better}
        for key in ("theoretical_min", "theoretical_max", "leaderboard_min", "leaderboard_max"):
            out[key] = getattr(self, key)
        if self.name is not None:
            out["task_name"] = self.name
        return out


def _gpu_ids(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise fail("a sequence of GPU ids or None", "Resources.gpu_ids", value)
    ids = tuple(value)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise fail("non-negative integer GPU ids", "Resources.gpu_ids", value)
    return ids


@frozen(kw_only=True)
class Resources:
    """What one job may use.

    Args:
        cpus: CPU cores (may be fractional), > 0.
        gpus: number of GPUs to lease (ignored when ``gpu_ids`` is given).
        gpu_ids: explicit GPU ids to lease, or None to let the sandbox pick ``gpus`` of them.
        memory_mb: memory limit in MiB, or None for the sandbox default.
    """

    cpus: float = field(default=1.0, converter=float)
    gpus: int = 0
    gpu_ids: tuple[int, ...] | None = field(default=None, converter=_gpu_ids)
    memory_mb: int | None = None

    def __attrs_post_init__(self) -> None:
        check_positive(self.cpus, "Resources.cpus")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise fail("an integer >= 0", "Resources.gpus", self.gpus)
        if self.memory_mb is not None and (
            isinstance(self.memory_mb, bool)
            or not isinstance(self.memory_mb, int)
            or self.memory_mb <= 0
        ):
            raise fail("an integer > 0 or None", "Resources.memory_mb", self.memory_mb)

    @property
    def gpu_count(self) -> int:
        """GPUs requested: ``len(gpu_ids)`` when ids are given, else ``gpus``."""
        return len(self.gpu_ids) if self.gpu_ids is not None else self.gpus

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "cpus": self.cpus,
            "gpus": self.gpus,
            "gpu_ids": None if self.gpu_ids is None else list(self.gpu_ids),
            "memory_mb": self.memory_mb,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resources:
        """Inverse of :meth:`to_dict`; unknown keys are an :class:`InvalidArgument` naming them."""
        return cls(**_checked_fields(cls, data))


# Variables that change what runs before a program's first line: the dynamic loader's and
# glibc's (they load code into every process, including a sandbox's own launch chain), and the
# interpreter's that add code or import paths at start-up. Refused in ``Job.env``.
LOADER_ENV_PREFIXES = ("LD_",)
LOADER_ENV_NAMES = frozenset(
    {"GCONV_PATH", "GLIBC_TUNABLES", "HOSTALIASES", "LOCPATH", "MALLOC_TRACE", "NLSPATH"}
    | {"RESOLV_HOST_CONF"}
)
# ``PYTHON*`` variables a job may set: none of them makes the interpreter run other code.
# Every other ``PYTHON*`` name is refused (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP,
# PYTHONUSERBASE, PYTHONNOUSERSITE, PYTHONWARNINGS (imports a category's module), ...).
PYTHON_ENV_ALLOWED = frozenset(
    {
        "PYTHONBREAKPOINT",
        "PYTHONDEVMODE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONFAULTHANDLER",
        "PYTHONHASHSEED",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONIOENCODING",
        "PYTHONOPTIMIZE",
        "PYTHONTRACEMALLOC",
        "PYTHONUNBUFFERED",
        "PYTHONUTF8",
        "PYTHONWARNDEFAULTENCODING",
    }
)


def env_problem(key: str, value: str) -> str | None:
    """Why ``key=value`` may not be in a job's environment, or None when it may.

    Refused: empty keys, keys with ``=``, NUL in a key or value, text that cannot be encoded
    for the operating system, loader variables (``LD_*`` and :data:`LOADER_ENV_NAMES`) and
    ``PYTHON*`` variables outside :data:`PYTHON_ENV_ALLOWED`. Job services call this per key
    to answer 422 naming it.
    """
    if not key:
        return "an environment variable needs a non-empty name"
    if "=" in key or "\0" in key:
        return "a variable name may not contain '=' or NUL; rename the variable"
    if "\0" in value:
        return "a value may not contain NUL; remove it"
    try:
        key.encode("utf-8", "surrogateescape")
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "name and value must be encodable text (no lone surrogates)"
    if key.startswith(LOADER_ENV_PREFIXES) or key in LOADER_ENV_NAMES:
        return (
            "dynamic loader variables are refused: they would load code before the program "
            "and its isolation; bundle the library with the program instead"
        )
    if key.startswith("PYTHON") and key not in PYTHON_ENV_ALLOWED:
        return (
            "this interpreter variable is refused: it changes what runs before the program; "
            f"allowed PYTHON* variables: {', '.join(sorted(PYTHON_ENV_ALLOWED))}"
        )
    return None


def _frozen_env(value: Mapping[str, str] | None) -> Mapping[str, str]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise fail("a mapping of str to str", "Job.env", value)
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise fail("a mapping of str to str", f"Job.env[{k!r}]", v)
        problem = env_problem(k, v)
        if problem is not None:
            raise InvalidArgument(f"Job.env[{k!r}] is refused: {problem}")
    return MappingProxyType(dict(sorted(value.items())))


def _checked_fields(cls: type, data: object) -> dict[str, Any]:
    """``data`` as keyword arguments of the attrs class ``cls``: a mapping whose keys are
    fields of ``cls``, holding every field without a default.

    Raises:
        InvalidArgumentType: ``data`` is not a mapping.
        InvalidArgument: an unknown key or a missing required one (named, with the fields).
    """
    name = cls.__name__
    if not isinstance(data, Mapping):
        raise InvalidArgumentType(
            f"Expected a mapping (the form to_dict() writes) but got {name} data={data!r:.80} "
            f"(type={type(data).__name__})"
        )
    fields = attrs.fields(cls)
    known = [f.name for f in fields]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise InvalidArgument(
            f"{name}.from_dict got unknown keys {unknown}; the fields are {known}"
        )
    missing = [f.name for f in fields if f.default is attrs.NOTHING and f.name not in data]
    if missing:
        raise InvalidArgument(f"{name}.from_dict is missing the required keys {missing}")
    return dict(data)


def _str_field(instance: Any, attribute: attrs.Attribute[str], value: object) -> None:
    """An attrs validator: ``value`` is a ``str``, else one error naming ``Class.field``."""
    if not isinstance(value, str):
        raise InvalidArgumentType(
            f"Expected str but got {type(instance).__name__}.{attribute.name}={value!r:.80} "
            f"(type={type(value).__name__})"
        )


def _split(value: object) -> Split:
    if isinstance(value, Split):
        return value
    if isinstance(value, str) and value in {"valid", "test"}:
        return Split(value)
    raise fail("'valid' or 'test'", "split", value)


@frozen(kw_only=True, eq=True, hash=False)
class Job:
    """One candidate program to run against one task.

    Args:
        code: the Python program. It reads the public data from ``$DATA_DIR`` and writes
            ``./submission.csv`` in its working directory.
        task: a bundled task name or a path to a task package.
        split: ``"valid"`` (search: graded against a hold-out of the public training data) or
            ``"test"`` (final grade against the private answers).
        timeout_s: wall-clock limit in seconds, > 0.
        resources: CPUs, GPUs and memory for the run.
        env: extra environment variables for the program (set inside its isolation only).
            Loader and start-up variables are refused (see :func:`env_problem`).
        name: optional label (shown in logs and by job services).
    """

    code: str = field(validator=_str_field)
    task: str = field(validator=_str_field)
    split: Split = field(default=Split.VALID, converter=_split)
    timeout_s: float = field(default=600.0)
    resources: Resources = field(factory=Resources)
    env: Mapping[str, str] = field(factory=dict, converter=_frozen_env)
    name: str | None = None

    @timeout_s.validator
    def _check_timeout(self, attribute: attrs.Attribute[float], value: float) -> None:
        check_positive(value, "Job.timeout_s")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "code": self.code,
            "task": self.task,
            "split": self.split.value,
            "timeout_s": self.timeout_s,
            "resources": self.resources.to_dict(),
            "env": dict(self.env),
            "name": self.name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        """Inverse of :meth:`to_dict`; unknown or missing keys are an :class:`InvalidArgument`
        naming them.
        """
        d = _checked_fields(cls, data)
        d["resources"] = Resources.from_dict(d.get("resources") or {})
        return cls(**d)


def _outcome(value: object) -> Outcome:
    if isinstance(value, Outcome):
        return value
    try:
        return Outcome(str(value))
    except ValueError:
        raise fail(f"one of {[o.value for o in Outcome]}", "outcome", value) from None


def _float_tuple(value: Iterable[float]) -> tuple[float, ...]:
    if type(value) is tuple and set(map(type, value)) <= {float}:
        return value  # already a tuple of floats (the type check runs in C)
    return tuple(map(float, value))


def _components(value: Iterable[Mapping[str, float]]) -> tuple[Mapping[str, float], ...]:
    return tuple(MappingProxyType(dict(v)) for v in value)


def _opt_finite_score(value: object) -> float | None:
    return optional_finite(value, "RunResult.score")


@frozen(kw_only=True)
class RunResult:
    """How one :class:`Job` ended.

    Args:
        outcome: the classification; a program failure is data, never an exception.
        score: the grader's score on ``split`` (finite) when ``outcome`` is SUCCESS, else None.
            Non-finite scores are stored as None (reference bug B1).
        split: the split the score was computed against.
        logs: captured stdout and stderr (capped: head and tail kept).
        logs_dropped_bytes: bytes of output dropped by the cap.
        error_signature: normalised error signature for failures (see
            :func:`openmle.error_signature`), None on success.
        detail: a one-line human explanation (grader reason, signal, engine message).
        exit_code: the program's exit code, or None when it never exited on its own.
        runtime_s: seconds the program ran (queue wait excluded).
        queue_s: seconds spent waiting for a slot before running.
        printed_score: a score the program printed itself ("Final Validation Score: x");
            recorded, never trusted unless a user opts in.
        artifacts: relative paths of files the program left in its workspace.
    """

    outcome: Outcome = field(converter=_outcome)
    score: float | None = field(default=None, converter=_opt_finite_score)
    split: Split = field(default=Split.VALID, converter=_split)
    logs: str = ""
    logs_dropped_bytes: int = 0
    error_signature: str | None = None
    detail: str = ""
    exit_code: int | None = None
    runtime_s: float = 0.0
    queue_s: float = 0.0
    printed_score: float | None = field(default=None, converter=_opt_finite_score)
    artifacts: tuple[str, ...] = field(default=(), converter=str_tuple)

    def __attrs_post_init__(self) -> None:
        if self.score is not None and self.outcome is not Outcome.SUCCESS:
            raise InvalidArgument(
                f"RunResult.score must be None unless outcome is SUCCESS "
                f"(got outcome={self.outcome.value!r}, score={self.score!r})"
            )
        check_positive(self.runtime_s, "RunResult.runtime_s", allow_zero=True)
        check_positive(self.queue_s, "RunResult.queue_s", allow_zero=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = attrs.asdict(self, recurse=False)
        d["outcome"] = self.outcome.value
        d["split"] = self.split.value
        d["artifacts"] = list(self.artifacts)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """Inverse of :meth:`to_dict`; unknown keys and a missing ``outcome`` are an
        :class:`InvalidArgument` naming them.
        """
        return cls(**_checked_fields(cls, data))

    @classmethod
    def infra_error(
        cls, detail: str, *, split: Split | str = Split.VALID, queue_s: float = 0.0, logs: str = ""
    ) -> RunResult:
        """A result saying the harness failed (never a score, never blamed on the program)."""
        return cls(
            outcome=Outcome.INFRA_ERROR,
            split=_split(split),
            detail=detail,
            error_signature="infra_error",
            queue_s=queue_s,
            logs=logs,
        )


# --------------------------------------------------------------------------------------------
# Operator model requests and responses


def _role(value: object) -> None:
    if value not in ("system", "user", "assistant"):
        raise fail("'system', 'user' or 'assistant'", "Message.role", value)


@frozen(kw_only=True)
class Message:
    """One chat message: ``role`` is ``"system"``, ``"user"`` or ``"assistant"``."""

    role: str = field(validator=lambda _, __, v: _role(v))
    content: str = field(validator=_str_field)


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


def _messages(value: object) -> tuple[Message, ...]:
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise fail("a sequence of Message", "ModelRequest.messages", value)
    out = []
    for m in value:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            out.append(Message(role=str(m.get("role")), content=str(m.get("content", ""))))
        else:
            raise fail("Message or {'role', 'content'} mappings", "ModelRequest.messages", m)
    if not out:
        raise fail("at least one message", "ModelRequest.messages", value)
    return tuple(out)


@frozen(kw_only=True, eq=True, hash=False)
class ModelRequest:
    """One completion request to an :class:`openmle.OperatorModel`.

    Args:
        messages: the chat, system message first if any.
        operator: which operator the request is for (None for auxiliary calls, e.g. summaries).
        temperature, top_p, max_tokens, seed, stop: sampling settings; None = model default.
        metadata: free-form, JSON-ready context (node ids, task name) a model may log or use.
            Offline models read their structured context from here; it never holds answers.
    """

    messages: tuple[Message, ...] = field(converter=_messages)
    operator: Operator | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = field(default=(), converter=str_tuple)
    metadata: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)

    @property
    def prompt_chars(self) -> int:
        """Total characters across all messages."""
        return sum(len(m.content) for m in self.messages)


@frozen(kw_only=True)
class Usage:
    """Token usage of one call (or a sum of calls)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@frozen(kw_only=True)
class ModelResponse:
    """What an operator model answered.

    Args:
        text: the answer (reasoning excluded).
        reasoning: reasoning content the service returned separately, if any.
        usage: token usage of the call.
        model: the model id that answered.
        finish_reason: e.g. ``"stop"`` or ``"length"``.
        latency_s: wall seconds the call took.
        cost_usd: cost if the model knows its price, else None.
        logprobs: the sampler's log-prob of each answer token, when the service returned them
            (e.g. ``OpenAIModel(logprobs=True)``), else None.
        token_ids: the answer's token ids, when the service returned them (vLLM with
            ``return_token_ids`` or ``return_tokens_as_token_ids``), else None.
    """

    text: str
    reasoning: str | None = None
    usage: Usage = field(factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    latency_s: float = 0.0
    cost_usd: float | None = None
    logprobs: tuple[float, ...] | None = None
    token_ids: tuple[int, ...] | None = None


# --------------------------------------------------------------------------------------------
# Selection


@frozen(kw_only=True)
class Candidate:
    """A node offered to a :class:`openmle.Selector`.

    Args:
        node_id: unique id of the node.
        score: raw validation score (task units), None when the node has none.
        parent_ids: ids of the node's parents (empty for a Draft).
        parent_best_score: best raw validation score among its parents, None if unknown.
        family: method family of the program (e.g. ``"lightgbm"``), ``"unknown"`` if undetected.
        family_count: how many *other* explored nodes share the family (for novelty), or None
            to let the selector count families among the candidates.
        reward: training reward of the node (RL selection), None if not rewarded.
        children_rewards: rewards of its direct children (RL "learning value").
        visits: how many times it was expanded (RL cooling).
        island: island index, or None.
        generation: generation index.
    """

    node_id: str
    score: float | None = field(default=None, converter=_opt_finite_score)
    parent_ids: tuple[str, ...] = field(default=(), converter=str_tuple)
    parent_best_score: float | None = field(default=None, converter=_opt_finite_score)
    family: str = "unknown"
    family_count: int | None = None
    reward: float | None = field(default=None, converter=_opt_finite_score)
    children_rewards: tuple[float, ...] = field(default=(), converter=_float_tuple)
    visits: int = 0
    island: int | None = None
    generation: int = 0


@frozen(kw_only=True)
class Selection:
    """What a selector chose, with the probability it gave every candidate.

    Args:
        chosen: the chosen node ids, in draw order.
        node_ids: every candidate's id, in the order given.
        probabilities: the probability of each candidate (same order; sums to 1).
        utilities: the utility of each candidate before the softmax (same order), if any.
        components: optional per-candidate breakdown (e.g. score/delta/novelty), same order.
    """

    chosen: tuple[str, ...] = field(converter=str_tuple)
    node_ids: tuple[str, ...] = field(converter=str_tuple)
    probabilities: tuple[float, ...] = field(converter=_float_tuple)
    utilities: tuple[float, ...] = field(default=(), converter=_float_tuple)
    components: tuple[Mapping[str, float], ...] = field(default=(), converter=_components)

    def __attrs_post_init__(self) -> None:
        if len(self.node_ids) != len(self.probabilities):
            raise InvalidArgument("Selection.probabilities must have one entry per candidate")
        if self.utilities and len(self.utilities) != len(self.node_ids):
            raise InvalidArgument("Selection.utilities must have one entry per candidate")
        for c in self.chosen:
            if c not in self.node_ids:
                raise InvalidArgument(f"Selection.chosen holds {c!r}, not among the candidates")

    def probability_of(self, node_id: str) -> float:
        """The probability the selector gave ``node_id``."""
        return self.probabilities[self.node_ids.index(node_id)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (a non-finite component is written as None);
        :meth:`from_dict` of it gives the selection back.
        """
        return {
            "chosen": list(self.chosen),
            "node_ids": list(self.node_ids),
            "probabilities": list(self.probabilities),
            "utilities": list(self.utilities),
            "components": [
                {k: (v if math.isfinite(v) else None) for k, v in c.items()}
                for c in self.components
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Selection:
        """Inverse of :meth:`to_dict` (``utilities`` and ``components`` may be absent, as in
        run directories written before they were recorded); unknown keys are errors.
        """
        if not isinstance(data, Mapping):
            raise fail("a mapping", "Selection data", data)
        unknown = sorted(set(data) - {a.name for a in attrs.fields(cls)})
        if unknown:
            raise InvalidArgument(f"Selection.from_dict got unknown keys {unknown}")
        d = dict(data)
        d["components"] = [
            {str(k): (math.nan if v is None else float(v)) for k, v in dict(c).items()}
            for c in d.get("components", ())
        ]
        return cls(**d)


def as_selection(value: Selection | Mapping[str, Any] | None) -> Selection | None:
    """A converter: a :class:`Selection`, its :meth:`Selection.to_dict` form, or None."""
    if value is None or isinstance(value, Selection):
        return value
    return Selection.from_dict(value)


def check_split(value: object) -> Split:
    """Convert ``"valid"``/``"test"`` to :class:`Split` or raise ``InvalidArgument``."""
    return _split(value)


def check_outcome(value: object) -> Outcome:
    """Convert an outcome name to :class:`Outcome` or raise ``InvalidArgument`` naming it."""
    return _outcome(value)


def check_operator(value: object) -> Operator:
    """Convert an operator name to :class:`Operator` or raise ``InvalidArgument``."""
    if isinstance(value, Operator):
        return value
    check_choice(str(value), [o.value for o in Operator], "operator")
    return Operator(str(value))
