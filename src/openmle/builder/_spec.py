"""Specification: the model reads the inventory and answers a typed JSON task spec.

The metric comes from a vetted library (the built-in metrics of :mod:`openmle.gym`): the model
names one and fills parameters. Only when none fits does it answer ``"custom"`` with the
direction, and write ``utils/metric.py``, which :mod:`openmle.builder._metric` checks before
use. An answer that is not valid JSON or breaks the schema is sent back with the validation
error, a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import field, frozen

from openmle import _summary_contract as _contract
from openmle._protocols import OperatorModel
from openmle._types import Message
from openmle.builder._conventions import Hints
from openmle.builder._inventory import (
    CLASS_FOLDERS,
    ColumnStats,
    FileInfo,
    Inventory,
    class_table_root,
    image_folders,
)
from openmle.errors import OpenMLEError
from openmle.gym import MAX_MAP_K, SPLIT_KINDS
from openmle.operators import ask_json

__all__ = [
    "CUSTOM_METRIC",
    "METRIC_LIBRARY",
    "PURPOSE_KEY",
    "PURPOSE_PREPARE",
    "PURPOSE_SPEC",
    "Attempt",
    "Inputs",
    "Join",
    "SpecError",
    "SpecResult",
    "SplitRule",
    "TaskSpec",
    "parse_spec",
    "request_spec",
]

PURPOSE_KEY = _contract.PURPOSE_KEY
"""The ``ModelRequest.metadata`` key that says what a builder request asks for."""
PURPOSE_SPEC = _contract.BUILDER_SPEC_PURPOSE
"""A request for a task spec; ``metadata["inventory"]`` holds the inventory as a dict."""
PURPOSE_PREPARE = _contract.BUILDER_PREPARE_PURPOSE
"""A request for ``prepare.py``; ``metadata["spec"]`` holds the spec as a dict."""

TASK_TYPES = ("binary", "multiclass", "regression")
METRIC_LIBRARY: Mapping[str, tuple[bool, tuple[str, ...]]] = {
    "accuracy": (True, ("binary", "multiclass")),
    "auc": (True, ("binary",)),
    "log_loss": (False, ("binary", "multiclass")),
    "macro_f1": (True, ("binary", "multiclass")),
    "map@k": (True, ("multiclass",)),
    "rmse": (False, ("regression",)),
    "rmsle": (False, ("regression",)),
    "mae": (False, ("regression",)),
}
"""Vetted metrics: name -> (higher is better, task types it fits). Graded by openmle.gym.

``map@k`` takes one parameter, ``metric_params = {"k": K}`` with ``K`` in ``[1, 100]``; the
others take none."""


CUSTOM_METRIC = "custom"
"""The spec's ``metric`` when no vetted metric fits: the model then writes ``utils/metric.py``
(a class whose name ends in ``Metrics``), which the builder checks before use (see
:func:`openmle.builder._metric.check_metric_code`); the answer must then give
``higher_is_better``."""
PURPOSE_METRIC = "builder_metric"
"""A request for ``utils/metric.py``; ``metadata["spec"]`` holds the spec as a dict."""


class SpecError(OpenMLEError):
    """The model gave no valid spec within its attempts (the message holds the last error)."""


def _params(value: Mapping[str, int]) -> dict[str, int]:
    return dict(value)


def _strings(value: Sequence[str]) -> tuple[str, ...]:
    """The converter of every tuple-of-names field (a JSON list becomes a tuple)."""
    return tuple(value)


@frozen(kw_only=True)
class SplitRule:
    """How the labelled rows are split into train and test (see :mod:`openmle.gym._splitrules`).

    Args:
        kind: ``"random"``, ``"stratified"`` (classification: per class), ``"group"`` (no value
            of ``column`` on both sides) or ``"time"`` (test rows at or after every training
            row in ``column``).
        column: the group or time column (None for random and stratified).
    """

    kind: str = "random"
    column: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"kind": self.kind, "column": self.column}


@frozen(kw_only=True)
class Join:
    """A raw table joined onto the labelled rows by a key column both tables hold.

    Args:
        file: the raw table (never the labelled table, the sample submission, an unlabeled
            test table or one holding the target).
        key: the column both tables hold; a key repeated in ``file`` is aggregated (row count
            and the mean of each numeric column per key), a unique one joins its columns.
    """

    file: str
    key: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"file": self.file, "key": self.key}


def _joins(value: Sequence[Join]) -> tuple[Join, ...]:
    return tuple(value)


@frozen(kw_only=True)
class Inputs:
    """What the labelled rows carry beyond their own columns (the task's kind).

    Args:
        images: a raw folder of images, one per labelled row: an image task. The package
            ships each row's image as ``images/<id><suffix>`` with an ``image`` column.
        image_column: the labelled table's column naming each row's image (a path under
            ``images``); None: the image whose file stem is the row's id.
        text_columns: free-text columns of the labelled table: a text task.
        joins: raw tables joined onto the labelled rows by key: a multi-table task.
    """

    images: str | None = None
    image_column: str | None = None
    text_columns: tuple[str, ...] = field(default=(), converter=_strings)
    joins: tuple[Join, ...] = field(default=(), converter=_joins)

    @property
    def kind(self) -> str:
        """``"image"``, ``"text"``, ``"joined"`` or ``"table"`` (none of them)."""
        if self.images is not None:
            return "image"
        if self.text_columns:
            return "text"
        return "joined" if self.joins else "table"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "images": self.images,
            "image_column": self.image_column,
            "text_columns": list(self.text_columns),
            "joins": [j.to_dict() for j in self.joins],
        }


@frozen(kw_only=True)
class TaskSpec:
    """What task to make of the raw data.

    Args:
        title: a short task name.
        data_file: the raw table holding the labelled rows.
        target: the label column.
        id_column: a column of unique ids, or None to number the rows (column ``id``).
        task_type: ``"binary"``, ``"multiclass"`` or ``"regression"``.
        metric: a name from :data:`METRIC_LIBRARY`.
        test_fraction: share of labelled rows held out as the test set (0.05 to 0.5).
        seed: the split's seed.
        description: what the task description must say (the goal, in plain words).
        metric_params: the metric's parameters (``{"k": 5}`` for ``map@k``; else empty).
        split: the split rule (default: random).
        answer_columns: the prediction columns after the id, in order, when a raw sample
            submission fixes them (one probability column per class for ``log_loss``);
            empty for the default (the target; the classes sorted).
        inputs: images, free text or joined tables the rows carry (default: none).
    """

    title: str
    data_file: str
    target: str
    id_column: str | None
    task_type: str
    metric: str
    test_fraction: float
    seed: int
    description: str
    metric_params: Mapping[str, int] = field(factory=dict, converter=_params, hash=False)
    split: SplitRule = SplitRule()
    answer_columns: tuple[str, ...] = field(default=(), converter=_strings)
    inputs: Inputs = Inputs()
    custom_higher_is_better: bool | None = None

    @property
    def custom(self) -> bool:
        """Whether the metric is the model's own ``utils/metric.py`` (:data:`CUSTOM_METRIC`)."""
        return self.metric == CUSTOM_METRIC

    @property
    def grader_metric(self) -> str | None:
        """The metric's name in ``task.toml`` (``map@5`` for ``map@k`` with k 5); None for
        :data:`CUSTOM_METRIC` (the package's ``utils/metric.py`` grades).
        """
        if self.custom:
            return None
        if self.metric == "map@k":
            return f"map@{self.metric_params['k']}"
        return self.metric

    @property
    def higher_is_better(self) -> bool:
        """The metric's direction, from the library (never from the model), or for
        :data:`CUSTOM_METRIC` the answer's (checked against the metric class).
        """
        if self.custom:
            return bool(self.custom_higher_is_better)
        return METRIC_LIBRARY[self.metric][0]

    @property
    def submission_id(self) -> str:
        """The id column of the package (``id`` when the rows are numbered)."""
        return self.id_column or "id"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "title": self.title,
            "data_file": self.data_file,
            "target": self.target,
            "id_column": self.id_column,
            "task_type": self.task_type,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "test_fraction": self.test_fraction,
            "seed": self.seed,
            "description": self.description,
            "metric_params": dict(self.metric_params),
            "split": self.split.to_dict(),
            "answer_columns": list(self.answer_columns),
            "custom_higher_is_better": self.custom_higher_is_better,
            "inputs": self.inputs.to_dict(),
            "kind": self.inputs.kind,
        }


@frozen(kw_only=True)
class Attempt:
    """One model answer and the error that made it invalid (empty when it was accepted)."""

    answer_chars: int
    error: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"answer_chars": self.answer_chars, "error": self.error}


@frozen(kw_only=True)
class SpecResult:
    """The spec stage's record: the accepted spec and every attempt."""

    spec: TaskSpec
    attempts: tuple[Attempt, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"spec": self.spec.to_dict(), "attempts": [a.to_dict() for a in self.attempts]}


SCHEMA_TEXT = f"""{{
  "title": string (1-80 chars),
  "data_file": string (a table path from the inventory; a path ending in "/" is a folder
               of images in one subfolder per class: its rows are the images, with columns
               "file" (the image's path under it, never a feature; named as the sample
               submission's id column when one answers for the folder; as "id_column" each
               row's id is its image's neutral file name in the package, "000012.png") and
               "label" (the class; named as the sample submission's answer column when that
               holds the classes)),
  "target": string (a column of data_file),
  "id_column": string (a column of unique values) or null (rows get an "id" column),
  "task_type": "binary" | "multiclass" | "regression",
  "metric": one of {sorted(METRIC_LIBRARY)}
            (binary/multiclass: accuracy, auc (binary only), log_loss, macro_f1,
            map@k (multiclass only); regression: rmse, rmsle (target >= 0), mae),
            or "{CUSTOM_METRIC}" only when none of them fits: you then give
            "higher_is_better" (true/false) and are asked for utils/metric.py,
  "metric_params": {{"k": integer in [1, {MAX_MAP_K}]}} for map@k, else omit or {{}},
  "test_fraction": number in [0.05, 0.5],
  "seed": integer >= 0,
  "split": {{"kind": one of {list(SPLIT_KINDS)}, "column": string or null}}
           (optional, default random; stratified: classification, column null;
           group/time: a non-target, non-id column of data_file),
  "description": string (1-2000 chars: the goal, in plain words; optional when the raw
                 data ships a description, which is used as it is),
  "inputs": {{"images": a folder of images, one per row, or null,
             "image_column": a data_file column naming each row's image file (a path under
                             images), or null (the image's file stem is the row's id),
             "text_columns": [free-text columns of data_file],
             "joins": [{{"file": another table, "key": a column of both tables}}]}}
            (a per-class image folder's data_file needs {{"images": that folder without the
            "/" ("" for "./"), "image_column": its first column, "file"}};
            optional otherwise: what the rows carry beyond their columns; a joined table must not
            hold the target, nor be the sample submission or an unlabeled test table)
}}
When the inventory lists conventions, follow them: the sample submission's id column, target
and format (labels: accuracy or macro_f1; values: a regression metric; probability: auc;
probabilities per class: log_loss), the labelled table (never the unlabeled test table), the
metric the description or the user names, and the column the user's goal names."""


def _text(obj: Mapping[str, Any], key: str, most: int) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > most:
        raise ValueError(f"{key!r} must be a non-empty string of at most {most} characters")
    return value.strip()


def parse_spec(obj: Any, inv: Inventory) -> TaskSpec:
    """Check a decoded answer against the schema and the inventory.

    Raises:
        ValueError: the first problem, naming the field and the fix.
    """
    if not isinstance(obj, dict):
        raise ValueError("the answer must be a JSON object")
    known = {a.name for a in TaskSpec.__attrs_attrs__}
    unknown = sorted(set(obj) - known - {"higher_is_better", "kind"})
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; use only {sorted(known)}")
    title = _text(obj, "title", 80)
    data_file, table = _data_table(obj, inv)
    target = _text(obj, "target", 500)
    if table.column(target) is None:
        raise ValueError(f"'target' {target!r} is not a column of {data_file!r}")
    id_column = _id_column(obj, table, target, data_file)
    task_type, metric, custom_hib = _task_and_metric(obj)
    target_col = table.column(target)
    if target_col is None:  # checked above; keeps the type narrow
        raise ValueError(f"'target' {target!r} is not a column of {data_file!r}")
    _check_target_fits(task_type, target_col, target)
    fraction, seed = _fraction_and_seed(obj)
    params = {} if metric == CUSTOM_METRIC else _metric_params(obj.get("metric_params"), metric)
    if metric == "rmsle" and target_col.minimum is not None and target_col.minimum < 0:
        raise ValueError(
            f"metric 'rmsle' needs a target >= 0 but {target!r} has negative values; use rmse"
        )
    split = _split_rule(obj.get("split"), table, target, id_column, task_type)
    hints = inv.hints
    inputs = parse_inputs(obj.get("inputs"), inv, table, target, id_column)
    if table.format == CLASS_FOLDERS:
        root = class_table_root(data_file)
        file = table.columns[0].name
        if (inputs.images, inputs.image_column) != (root, file):
            raise ValueError(
                f"'data_file' {data_file!r} is a per-class image folder: set 'inputs' to "
                f'{{"images": {root!r}, "image_column": "{file}"}} (each row is one of its '
                "images)"
            )
    follows = hints.answer_format == "probabilities" and target == hints.target
    answer_columns = hints.answer_columns if follows and metric == "log_loss" else ()
    given = obj.get("answer_columns")
    if given is not None and (not isinstance(given, list) or tuple(given) != answer_columns):
        raise ValueError(
            f"'answer_columns' must be {list(answer_columns)} (from the sample submission); omit it"
        )
    spec = TaskSpec(
        title=title,
        data_file=data_file,
        target=target,
        id_column=id_column,
        task_type=str(task_type),
        metric=str(metric),
        test_fraction=float(fraction),
        seed=seed,
        description=_with_goal(hints.description or _text(obj, "description", 2000), hints),
        metric_params=params,
        split=split,
        answer_columns=answer_columns,
        inputs=inputs,
        custom_higher_is_better=custom_hib,
    )
    conflicts = hint_conflicts(spec, hints)
    if conflicts:
        raise ValueError(conflicts[0][1])
    return spec


_INPUT_KEYS = ("images", "image_column", "text_columns", "joins")


def parse_inputs(
    value: Any, inv: Inventory, table: FileInfo, target: str, id_column: str | None
) -> Inputs:
    """The answer's ``inputs``, checked against the inventory.

    Raises:
        ValueError: the first problem, naming the field and the fix.
    """
    if value is None:
        return Inputs()
    if not isinstance(value, dict) or set(value) - set(_INPUT_KEYS):
        raise ValueError(f"'inputs' must be an object with keys among {list(_INPUT_KEYS)}")
    images, image_column = value.get("images"), value.get("image_column")
    if images is not None:
        folders = image_folders(inv.files)
        if not isinstance(images, str) or images.strip("/") not in folders:
            raise ValueError(
                f"'inputs.images' {images!r} is not a raw folder of images; use one of "
                f"{sorted(folders)[:10]}"
            )
        images = images.strip("/")
    if image_column is not None:
        if images is None:
            raise ValueError("'inputs.image_column' needs 'inputs.images'; set both or neither")
        if not isinstance(image_column, str) or table.column(image_column) is None:
            raise ValueError(f"'inputs.image_column' must be a column of {table.path!r}")
        if image_column == target:
            raise ValueError("'inputs.image_column' is the target; name the image column")
    texts = value.get("text_columns") or []
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("'inputs.text_columns' must be a list of column names")
    for name in texts:
        col = table.column(name)
        if col is None or col.kind != "categorical" or name in (target, id_column):
            raise ValueError(
                f"'inputs.text_columns' {name!r} is not a non-target text column of {table.path!r}"
            )
    return Inputs(
        images=images,
        image_column=image_column,
        text_columns=tuple(dict.fromkeys(texts)),
        joins=_parse_joins(value.get("joins") or [], inv, table, target),
    )


def _parse_joins(value: Any, inv: Inventory, table: FileInfo, target: str) -> tuple[Join, ...]:
    if not isinstance(value, list):
        raise ValueError('\'inputs.joins\' must be a list of {"file": ..., "key": ...}')
    hints = inv.hints
    barred = {table.path, hints.sample_file, *hints.unlabeled_files}
    out: list[Join] = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"file", "key"}:
            raise ValueError('each of \'inputs.joins\' must be {"file": ..., "key": ...}')
        file, key = item["file"], item["key"]
        other = inv.file(file) if isinstance(file, str) else None
        if other is None or other.rows is None:
            raise ValueError(f"'inputs.joins' file {file!r} is not a readable raw table")
        if file in barred:
            raise ValueError(
                f"'inputs.joins' file {file!r} is the labelled table, the sample submission "
                "or an unlabeled test table; join another table"
            )
        if other.column(target) is not None:
            raise ValueError(
                f"'inputs.joins' file {file!r} holds the target {target!r}; joining it leaks "
                "the label"
            )
        if {c.name for c in other.columns} <= {c.name for c in table.columns}:
            raise ValueError(
                f"'inputs.joins' file {file!r} adds no column to {table.path!r} (an unlabeled "
                "copy of it?); join a table with other columns"
            )
        if not isinstance(key, str) or table.column(key) is None or other.column(key) is None:
            raise ValueError(
                f"'inputs.joins' key {key!r} must be a column of {table.path!r} and {file!r}"
            )
        if key == target:
            raise ValueError("'inputs.joins' key is the target; join by another column")
        out.append(Join(file=file, key=key))
    return tuple(out)


def _with_goal(description: str, hints: Hints) -> str:
    """The description, ending with the user's goal when there is one (at most 2,000 chars)."""
    if not hints.goal or hints.goal in description:
        return description
    tail = f"\n\nThe user's goal: {hints.goal}"
    return description[: 2000 - len(tail)].rstrip() + tail


FORMAT_METRICS: Mapping[str, tuple[str, ...]] = {
    "labels": ("accuracy", "macro_f1"),
    "values": ("rmse", "rmsle", "mae"),
    "probability": ("auc",),
    "probabilities": ("log_loss",),
}
"""The vetted metrics that grade a sample submission's answer format."""


def hint_conflicts(spec: TaskSpec, hints: Hints) -> list[tuple[str, str]]:
    """How ``spec`` contradicts the raw folder's conventions and the user's goal.

    Returns ``(finding code, message naming the fix)`` pairs, the most binding first: the
    goal (``contradicts_goal``), the sample submission (``contradicts_sample_submission``),
    the description's metric (``contradicts_description``). Empty when it follows them.
    """
    out: list[tuple[str, str]] = []
    if spec.data_file in hints.unlabeled_files:
        out.append(
            (
                "contradicts_sample_submission",
                f"'data_file' {spec.data_file!r} is the unlabeled test table; use the labelled "
                f"table {hints.labelled_file!r}",
            )
        )
    if hints.goal_target is not None and spec.target != hints.goal_target:
        out.append(
            (
                "contradicts_goal",
                f"the user's goal names the target {hints.goal_target!r}, not {spec.target!r}",
            )
        )
    if hints.metric is not None and spec.metric != hints.metric:
        out.append(
            ("contradicts_goal", f"the user asked for metric {hints.metric!r}, not {spec.metric!r}")
        )
    allowed: tuple[str, ...] = ()
    if hints.target is not None and hints.goal_target in (None, hints.target):
        allowed = FORMAT_METRICS.get(hints.answer_format, ())
        if (spec.data_file, spec.target) != (hints.labelled_file, hints.target):
            out.append(
                (
                    "contradicts_sample_submission",
                    f"the sample submission {hints.sample_file!r} answers {hints.target!r} of "
                    f"{hints.labelled_file!r}; use them as 'target' and 'data_file'",
                )
            )
        elif spec.submission_id != hints.id_column:
            out.append(
                (
                    "contradicts_sample_submission",
                    f"the sample submission's id column is {hints.id_column!r}; use it as "
                    "'id_column'",
                )
            )
        elif allowed and spec.metric not in allowed:
            out.append(
                (
                    "contradicts_sample_submission",
                    f"the sample submission holds {hints.answer_format}; metric "
                    f"{spec.metric!r} does not grade that, use one of {list(allowed)}",
                )
            )
    elif hints.answer_format == "several" and hints.goal_target is None:
        out.append(
            (
                "contradicts_sample_submission",
                f"the sample submission has several target columns {list(hints.answer_columns)}"
                "; no vetted metric grades several targets, name one with a goal",
            )
        )
    named = hints.description_metric
    if (
        named is not None
        and hints.metric is None
        and spec.task_type in METRIC_LIBRARY[named][1]
        and (not allowed or named in allowed)
        and spec.metric != named
    ):
        out.append(
            (
                "contradicts_description",
                f"the description names metric {named!r}; use it, not {spec.metric!r}",
            )
        )
    return out


def _data_table(obj: Mapping[str, Any], inv: Inventory) -> tuple[str, FileInfo]:
    """The answer's ``data_file`` and its table in the inventory (a readable table)."""
    data_file = _text(obj, "data_file", 500)
    table = inv.file(data_file)
    if table is None or table.rows is None:
        names = [f.path for f in inv.tables]
        raise ValueError(f"'data_file' {data_file!r} is not a readable table; use one of {names}")
    return data_file, table


def _id_column(obj: Mapping[str, Any], table: FileInfo, target: str, data_file: str) -> str | None:
    """The answer's ``id_column``: a unique non-target column, or ``None`` to number rows."""
    id_column = obj.get("id_column")
    if id_column is not None:
        if not isinstance(id_column, str):
            raise ValueError("'id_column' must be a column name or null")
        col = table.column(id_column)
        if col is None or id_column == target:
            raise ValueError(
                f"'id_column' {id_column!r} is not a non-target column of {data_file!r}"
            )
        if not col.all_unique:
            raise ValueError(f"'id_column' {id_column!r} is not unique; use null to number rows")
    elif table.column("id") is not None:
        raise ValueError(
            "the table already has a column 'id'; name it as 'id_column' or pick another"
        )
    return id_column


def _task_and_metric(obj: Mapping[str, Any]) -> tuple[str, str, bool | None]:
    """The answer's ``task_type`` and ``metric``, checked against each other, and the
    direction a custom metric's answer gives (None for a vetted metric).
    """
    task_type = str(obj.get("task_type"))
    if task_type not in TASK_TYPES:
        raise ValueError(f"'task_type' must be one of {list(TASK_TYPES)}")
    metric = str(obj.get("metric"))
    if metric == CUSTOM_METRIC:
        hib = obj.get("higher_is_better")
        if not isinstance(hib, bool):
            raise ValueError(f"metric {CUSTOM_METRIC!r} needs 'higher_is_better': true or false")
        if obj.get("metric_params"):
            raise ValueError(f"metric {CUSTOM_METRIC!r} takes no 'metric_params'; omit them")
        return task_type, metric, hib
    if metric not in METRIC_LIBRARY:
        raise ValueError(f"'metric' must be one of {sorted(METRIC_LIBRARY)} or {CUSTOM_METRIC!r}")
    if task_type not in METRIC_LIBRARY[metric][1]:
        raise ValueError(f"metric {metric!r} does not fit task_type {task_type!r}")
    if "higher_is_better" in obj and obj["higher_is_better"] is not METRIC_LIBRARY[metric][0]:
        raise ValueError(f"'higher_is_better' contradicts metric {metric!r}; omit it")
    return task_type, metric, None


def _check_target_fits(task_type: str, target_col: ColumnStats, target: str) -> None:
    """Raise unless the target column's values fit the task type."""
    if task_type == "binary" and target_col.unique != 2:
        raise ValueError(
            f"task_type 'binary' needs 2 target values; {target!r} has {target_col.unique}"
        )
    if task_type == "regression" and target_col.kind == "categorical":
        raise ValueError(
            f"task_type 'regression' needs a numeric target; {target!r} is categorical"
        )


def _fraction_and_seed(obj: Mapping[str, Any]) -> tuple[float, int]:
    """The answer's ``test_fraction`` (in [0.05, 0.5]) and ``seed`` (an integer >= 0)."""
    fraction = obj.get("test_fraction")
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not 0.05 <= fraction <= 0.5
    ):
        raise ValueError("'test_fraction' must be a number in [0.05, 0.5]")
    seed = obj.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError("'seed' must be an integer >= 0")
    return fraction, seed


def _metric_params(value: Any, metric: str) -> dict[str, int]:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError("'metric_params' must be a JSON object (or omitted)")
    if metric != "map@k":
        if value:
            raise ValueError(f"metric {metric!r} takes no 'metric_params'; omit them")
        return {}
    if set(value) != {"k"}:
        raise ValueError(f"metric 'map@k' needs 'metric_params' {{\"k\": 1..{MAX_MAP_K}}} only")
    k = value["k"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_MAP_K:
        raise ValueError(f"'metric_params.k' must be an integer in [1, {MAX_MAP_K}]; got {k!r}")
    return {"k": k}


def _split_rule(
    value: Any, table: FileInfo, target: str, id_column: str | None, task_type: str
) -> SplitRule:
    if value is None:
        return SplitRule()
    if not isinstance(value, dict) or set(value) - {"kind", "column"}:
        raise ValueError("'split' must be an object with 'kind' and 'column' (or omitted)")
    kind, column = value.get("kind"), value.get("column")
    if kind not in SPLIT_KINDS:
        raise ValueError(f"'split.kind' must be one of {list(SPLIT_KINDS)}")
    if kind in ("random", "stratified"):
        if column is not None:
            raise ValueError(f"'split.column' must be null for a {kind} split")
        if kind == "stratified" and task_type == "regression":
            raise ValueError("a stratified split needs a classification task; use random")
        return SplitRule(kind=str(kind))
    if not isinstance(column, str) or table.column(column) is None:
        raise ValueError(f"a {kind} split needs 'split.column': a column of {table.path!r}")
    if column in (target, id_column):
        raise ValueError(
            f"'split.column' {column!r} is the target or the id column; pick another column"
        )
    col = table.column(column)
    if col is not None and col.missing:
        raise ValueError(f"'split.column' {column!r} has missing values; pick a filled column")
    if kind == "group" and col is not None and col.unique < 2:
        raise ValueError(f"'split.column' {column!r} has fewer than 2 groups")
    return SplitRule(kind=str(kind), column=column)


def spec_messages(inv: Inventory) -> list[Message]:
    """The spec prompt: the inventory text and the schema."""
    return [
        Message(
            role="system",
            content="You turn a raw dataset into a supervised machine-learning task. Answer "
            "with one JSON object only, in this schema:\n" + SCHEMA_TEXT,
        ),
        Message(role="user", content="Inventory of the raw data:\n" + inv.text()),
    ]


def task_messages(contract: str, spec: TaskSpec, context: str) -> list[Message]:
    """A prompt about a decided task: ``contract`` as the system message, then the spec (as
    indented JSON) followed by ``context`` (its own heading included) as the user message.
    """
    import json

    return [
        Message(role="system", content=contract),
        Message(
            role="user",
            content="Task spec:\n" + json.dumps(spec.to_dict(), indent=1) + context,
        ),
    ]


async def request_spec(
    model: OperatorModel, inv: Inventory, *, max_attempts: int = 3
) -> SpecResult:
    """Ask ``model`` for a spec; an invalid answer is sent back with its error.

    Raises:
        SpecError: no valid spec after ``max_attempts`` answers.
    """
    asked = await ask_json(
        model,
        spec_messages(inv),
        lambda obj: parse_spec(obj, inv),
        metadata={PURPOSE_KEY: PURPOSE_SPEC, "inventory": inv.to_dict()},
        max_attempts=max_attempts,
    )
    attempts = tuple(Attempt(answer_chars=a.answer_chars, error=a.error) for a in asked.attempts)
    if asked.value is not None:
        return SpecResult(spec=asked.value, attempts=attempts)
    raise SpecError(
        f"the model gave no valid task spec in {max_attempts} attempt(s); last error: "
        f"{attempts[-1].error}"
    )
