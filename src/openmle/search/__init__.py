"""Search: experience cards, the task board, parent selection, operator memory and the loop."""

from __future__ import annotations

__all__: list[str] = []
