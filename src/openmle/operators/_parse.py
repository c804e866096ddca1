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

__all__ = [
    "Proposal",
    "extract_code_blocks",
    "parse_response",
    "program_fingerprint",
    "same_program",
]

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.M)
_PY_TAGS = frozenset({"python", "py", "python3"})


@frozen(kw_only=True)
class Proposal:
    """A parsed answer.

    Args:
        plan: the prose before the chosen program (stripped; may be empty).
        code: the program, or None when the answer held none.
        outcome: None when a program was found, else ``Outcome.MISSING_CODE``.
        n_blocks: how many fenced blocks the answer had.
    """

    plan: str
    code: str | None
    outcome: Outcome | None
    n_blocks: int = 0


def extract_code_blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block as ``(tag, body, start offset)``, in order."""
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
    except (SyntaxError, ValueError):
        return False
    return True


def parse_response(text: str) -> Proposal:
    """Split an answer into a plan and one program (see the module docstring for the rules)."""
    blocks = extract_code_blocks(text)
    tagged = [b for b in blocks if b[0] in _PY_TAGS]
    pool = tagged or [b for b in blocks if not b[0]]
    pool = [b for b in pool if b[1].strip()]
    if not pool:
        return Proposal(
            plan=text.strip(), code=None, outcome=Outcome.MISSING_CODE, n_blocks=len(blocks)
        )
    best = max(enumerate(pool), key=lambda ib: (_parses(ib[1][1]), len(ib[1][1].strip()), ib[0]))[1]
    plan = text[: best[2]].strip()
    return Proposal(plan=plan, code=best[1].strip("\n") + "\n", outcome=None, n_blocks=len(blocks))


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
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "text:" + " ".join(code.split())
    tree = _StripDocstrings().visit(tree)
    return "ast:" + ast.dump(tree, annotate_fields=False, include_attributes=False)


def program_fingerprint(code: str) -> str:
    """SHA-256 of the normalised program (AST without comments, layout and docstrings)."""
    return hashlib.sha256(_normal_form(code).encode()).hexdigest()


def same_program(a: str, b: str) -> bool:
    """True when two programs are the same up to comments, formatting and docstrings.

    Programs that do not parse are compared by their whitespace-collapsed text.
    """
    return _normal_form(a) == _normal_form(b)
