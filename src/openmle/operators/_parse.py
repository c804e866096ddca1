"""Reading an operator model's answer: a plan and one program; normalised program identity.

Several fenced code blocks resolve deterministically (reference S7: the released code glued
every block together, so an answer that showed a snippet and then the program produced a
broken file):

1. candidates are the fenced blocks tagged ``python``/``py``/``python3``, or, when there are
   none, the untagged blocks;
2. among them the blocks that parse win over those that do not;
3. then the longest block wins, and the later one on a tie.

An unterminated final fence (a response cut at the token limit) counts as a block up to the
end of the text. No block at all gives ``Outcome.MISSING_CODE``.

Model output is untrusted, so the parser bounds its own work: ``ast.parse`` costs about 280 times
the program's size in memory (measured: 1 MiB of code took 286 MiB and 5 s; a 5 MB block 2.9 GB;
a 20 MB block exhausted an 8 GB limit). A block longer than ``max_code_chars`` (default
:data:`DEFAULT_MAX_CODE_CHARS`, 256 Ki characters) is never analysed and never chosen; when only
such blocks are left the answer is ``Outcome.MISSING_CODE`` with a
:attr:`ParsedAnswer.detail` naming the size and the limit. Lone surrogates (invalid UTF-16
halves a JSON answer can carry, which no file or request can encode) are replaced by ``U+FFFD``
in the plan and the program.

Program identity (:func:`same_program`) compares the normalised AST (comments, formatting and
docstrings ignored), so a reformatted copy of the parent is still the parent (S7: the
released check compared text after ``black``, which changes with black's version).
"""

from __future__ import annotations

import ast
import hashlib
import re

from attrs import frozen

from openmle._types import Outcome
from openmle._validation import check_type, fail

__all__ = [
    "DEFAULT_MAX_CODE_CHARS",
    "ParsedAnswer",
    "extract_code_blocks",
    "parse_response",
    "program_fingerprint",
    "same_program",
]

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.M)
_PY_TAGS = frozenset({"python", "py", "python3"})
_SURROGATE = re.compile("[\ud800-\udfff]")

DEFAULT_MAX_CODE_CHARS = 256 * 1024
"""The longest program :func:`parse_response` analyses and returns (characters)."""


@frozen(kw_only=True)
class ParsedAnswer:
    """A parsed answer.

    Args:
        plan: the prose before the chosen program (stripped; may be empty).
        code: the program, or None when the answer held none.
        outcome: None when a program was found, else ``Outcome.MISSING_CODE``.
        n_blocks: how many fenced blocks the answer had.
        detail: why there is no program when a reason beyond "no block" is known (a block
            over the size limit), else empty.
    """

    plan: str
    code: str | None
    outcome: Outcome | None
    n_blocks: int = 0
    detail: str = ""


def extract_code_blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block as ``(tag, body, start offset)``, in order.

    Raises:
        InvalidArgumentType: ``text`` is not a str.
    """
    check_type(text, str, "text")
    blocks: list[tuple[str, str, int]] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            break
        fence, tag = m.group(1), m.group(2).lower()
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        c = close.search(text, body_start)
        end = c.start() if c else len(text)
        blocks.append((tag, text[body_start:end].rstrip("\n"), m.start()))
        if not c:
            break
        pos = c.end()
    return blocks


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def parse_response(text: str, *, max_code_chars: int = DEFAULT_MAX_CODE_CHARS) -> ParsedAnswer:
    """Split an answer into a plan and one program (see the module docstring for the rules).

    Args:
        text: the model's answer.
        max_code_chars: blocks longer than this are neither analysed nor returned.

    Raises:
        InvalidArgument: ``max_code_chars`` is not an integer >= 1.
        InvalidArgumentType: ``text`` is not a str.
    """
    check_type(text, str, "text")
    if (
        isinstance(max_code_chars, bool)
        or not isinstance(max_code_chars, int)
        or max_code_chars < 1
    ):
        raise fail("an integer >= 1", "parse_response(max_code_chars=...)", max_code_chars)
    text = _clean(text)
    blocks = extract_code_blocks(text)
    tagged = [b for b in blocks if b[0] in _PY_TAGS]
    pool = tagged or [b for b in blocks if not b[0]]
    pool = [b for b in pool if b[1].strip()]
    fits = [b for b in pool if len(b[1]) <= max_code_chars]
    if not fits:
        detail = ""
        if pool:
            size = max(len(b[1]) for b in pool)
            detail = (
                f"the answer's program has {size} characters, over the parser's limit of "
                f"max_code_chars={max_code_chars}; it was not analysed"
            )
        return ParsedAnswer(
            plan=text.strip() if not pool else text[: pool[0][2]].strip(),
            code=None,
            outcome=Outcome.MISSING_CODE,
            n_blocks=len(blocks),
            detail=detail,
        )
    # Longest first (later on a tie); the first that parses wins, else the longest. At most
    # 4 * max_code_chars characters are analysed in all, so many blocks cannot multiply the cost.
    order = sorted(enumerate(fits), key=lambda ib: (len(ib[1][1].strip()), ib[0]), reverse=True)
    best = order[0][1]
    budget = 4 * max_code_chars
    for _, block in order:
        budget -= len(block[1])
        if budget < 0:
            break
        if _parses(block[1]):
            best = block
            break
    plan = text[: best[2]].strip()
    return ParsedAnswer(
        plan=plan, code=best[1].strip("\n") + "\n", outcome=None, n_blocks=len(blocks)
    )


class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
        self.generic_visit(node)
        return node

    visit_Module = _strip
    visit_FunctionDef = _strip
    visit_AsyncFunctionDef = _strip
    visit_ClassDef = _strip


def _normal_form(code: str) -> str:
    if len(code) > DEFAULT_MAX_CODE_CHARS:  # too big to analyse: compare the text
        return "text:" + " ".join(code.split())
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "text:" + " ".join(code.split())
    tree = _StripDocstrings().visit(tree)
    return "ast:" + ast.dump(tree, annotate_fields=False, include_attributes=False)


def program_fingerprint(code: str) -> str:
    """SHA-256 of the normalised program (AST without comments, layout and docstrings).

    Raises:
        InvalidArgumentType: ``code`` is not a str.
    """
    check_type(code, str, "code")
    return hashlib.sha256(_normal_form(code).encode()).hexdigest()


def same_program(a: str, b: str) -> bool:
    """True when two programs are the same up to comments, formatting and docstrings.

    Programs that do not parse, or are longer than :data:`DEFAULT_MAX_CODE_CHARS`, are compared
    by their whitespace-collapsed text.

    Raises:
        InvalidArgumentType: ``a`` or ``b`` is not a str.
    """
    check_type(a, str, "a")
    check_type(b, str, "b")
    return _normal_form(a) == _normal_form(b)
