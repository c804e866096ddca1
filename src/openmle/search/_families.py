"""One method-family detector: what kind of model a candidate program builds.

A *family* is up to three tags joined by ``"+"`` in a fixed order, for example ``"lightgbm"``,
``"neural_net+vision"`` or ``"ensemble+lightgbm+xgboost"``; ``"unknown"`` when nothing is
recognised. Novelty in parent selection counts how many explored nodes share a family, so the
detector must be stable (the same program always gives the same family) and coarse enough that
two programs of the same idea land together.

How it reads a program: the imports (top-level module names, from the AST; a line-based regex
when the program does not parse) and the identifiers the code uses (names and attribute names,
from the AST). Comments and string literals are ignored.

Departures from the released code (reference S4): the released system ships two detectors that
disagree (the RL one tags ``vision`` when any text contains "image" and uses ``cv`` for
cross-validation; the Evo one tags ``ensemble`` from comments and uses ``cv`` for computer vision).
This one

- reads code, never comments or strings (``print('image size')`` is not a vision program, and a
  ``# blend`` comment is not an ensemble);
- names computer vision ``vision`` and never tags cross-validation (every tabular program
  cross-validates; it says nothing about the method);
- lets ``transformers`` subsume ``neural_net`` (every Hugging Face program imports torch);
- tags ``text`` for classical NLP (nltk, spaCy, gensim, or TF-IDF/count vectorisers);
- tags ``ensemble`` from sklearn voting/stacking classes or identifiers that name a blend,
  stack or ensemble (``blend_preds``, ``stack_models``, ``ensemble_weights``);
- keeps ``sklearn`` only when nothing more specific was found, as Evo does.
"""

from __future__ import annotations

import ast
import re

__all__ = ["FAMILY_TAGS", "UNKNOWN_FAMILY", "extract_imports", "method_family"]

UNKNOWN_FAMILY = "unknown"

FAMILY_TAGS: tuple[str, ...] = (
    "ensemble",
    "transformers",
    "neural_net",
    "vision",
    "text",
    "catboost",
    "lightgbm",
    "xgboost",
    "sklearn",
)
"""Every tag the detector can emit, in the order tags appear in a family."""

_MAX_TAGS = 3

_IMPORT_TAGS: dict[str, str] = {
    "transformers": "transformers",
    "sentence_transformers": "transformers",
    "tokenizers": "transformers",
    "peft": "transformers",
    "torch": "neural_net",
    "tensorflow": "neural_net",
    "keras": "neural_net",
    "jax": "neural_net",
    "flax": "neural_net",
    "lightning": "neural_net",
    "pytorch_lightning": "neural_net",
    "fastai": "neural_net",
    "cv2": "vision",
    "torchvision": "vision",
    "timm": "vision",
    "albumentations": "vision",
    "PIL": "vision",
    "skimage": "vision",
    "imageio": "vision",
    "nltk": "text",
    "spacy": "text",
    "gensim": "text",
    "textblob": "text",
    "catboost": "catboost",
    "lightgbm": "lightgbm",
    "xgboost": "xgboost",
    "sklearn": "sklearn",
}

_ENSEMBLE_NAMES = frozenset(
    {"VotingClassifier", "VotingRegressor", "StackingClassifier", "StackingRegressor"}
)
_ENSEMBLE_WORD = re.compile(r"(?:^|_)(?:blend|blending|stack|stacking|ensemble)(?:_|$)", re.I)
_TEXT_NAMES = frozenset({"TfidfVectorizer", "CountVectorizer", "HashingVectorizer"})
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import|import\s+([A-Za-z_][\w.]*))")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _parse(code: str) -> ast.AST | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _imports_from_tree(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _imports_from_lines(code: str) -> set[str]:
    found: set[str] = set()
    for line in code.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            found.add((m.group(1) or m.group(2)).split(".")[0])
    return found


def extract_imports(code: str) -> tuple[str, ...]:
    """Sorted top-level module names the program imports.

    Relative imports are skipped. A program that does not parse is read line by line
    (``import x`` / ``from x import y`` at the start of a line).
    """
    tree = _parse(code)
    found = _imports_from_tree(tree) if tree is not None else _imports_from_lines(code)
    return tuple(sorted(found))


def _identifiers(code: str, tree: ast.AST | None) -> set[str]:
    if tree is None:
        kept = []
        for line in code.splitlines():
            stripped = line.split("#", 1)[0]
            kept.append(re.sub(r"(['\"]).*?\1", "", stripped))
        return set(_WORD.findall("\n".join(kept)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.name.rsplit(".", 1)[-1])
            if node.asname:
                names.add(node.asname)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def method_family(code: str) -> str:
    """The method family of a program: up to three tags from :data:`FAMILY_TAGS` joined by "+".

    Args:
        code: the program's source (need not parse).

    Returns:
        e.g. ``"lightgbm"``, ``"neural_net+vision"``, ``"ensemble+lightgbm+xgboost"``, or
        ``"unknown"`` when no tag applies. Deterministic; never raises.
    """
    return analyse(code)[1]


def analyse(code: str) -> tuple[tuple[str, ...], str]:
    """``(extract_imports(code), method_family(code))`` with one parse."""
    tree = _parse(code)
    imports = _imports_from_tree(tree) if tree is not None else _imports_from_lines(code)
    names = _identifiers(code, tree)
    tags = {_IMPORT_TAGS[m] for m in imports if m in _IMPORT_TAGS}
    if names & _ENSEMBLE_NAMES or any(_ENSEMBLE_WORD.search(n) for n in names):
        tags.add("ensemble")
    if names & _TEXT_NAMES:
        tags.add("text")
    if "transformers" in tags:
        tags.discard("neural_net")
    if len(tags) > 1:
        tags.discard("sklearn")
    ordered = [t for t in FAMILY_TAGS if t in tags][:_MAX_TAGS]
    return tuple(sorted(imports)), "+".join(ordered) if ordered else UNKNOWN_FAMILY
