"""The four operators as prompt builders and response parsers."""

from __future__ import annotations

__all__: list[str] = []
