"""Errors a user can hit when loading or applying a LoRA file."""

from __future__ import annotations

from mixkit.errors import MixkitError


class LoraMismatchError(MixkitError, ValueError):
    """A LoRA file does not fit the model: unmatched keys, wrong shapes or the wrong base model.

    `problems` keeps the offending keys so callers (UI, CLI) can show them without parsing text.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


def list_for_humans(items: list[str], limit: int = 12) -> str:
    """Join a possibly long key list, cut after `limit` items with a count of the rest."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    return shown + (f", ... and {rest} more" if rest > 0 else "")
