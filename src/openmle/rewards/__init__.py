"""Reward transforms: signed scores, bounds, score-to-reward maps, advantages, the reward guard."""

from __future__ import annotations

__all__: list[str] = []
