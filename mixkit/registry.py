"""A name -> object registry, the one mechanism behind every extension point.

Samplers, attention backends, LoRA formats, models and apps are all chosen by name. Each of them
is a `Registry`, so an unknown name always fails the same way: an error listing the valid names.
"""

from __future__ import annotations

import difflib
from typing import Generic, Iterator, TypeVar

from mixkit.errors import UnknownNameError

T = TypeVar("T")

class Registry(Generic[T]):
    """Maps names to entries; lookups are exact first, then case-insensitive."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None, *, replace: bool = False):
        """Add `entry` under `name`; without `entry`, return a decorator."""
        if entry is None:
            def decorator(obj: T) -> T:
                self.register(name, obj, replace=replace)
                return obj
            return decorator
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered; pass replace=True to override it")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove and return the entry registered under exactly `name` (a refreshed folder's removed file)."""
        if name not in self._entries:
            raise KeyError(self.unknown_message(name))
        return self._entries.pop(name)

    def get(self, name: str) -> T:
        if name in self._entries:
            return self._entries[name]
        if isinstance(name, str):
            folded = {key.casefold(): key for key in self._entries}
            if name.casefold() in folded:
                return self._entries[folded[name.casefold()]]
        raise UnknownNameError(self.unknown_message(name))

    def unknown_message(self, name: object) -> str:
        valid = ", ".join(repr(n) for n in self._entries) or "(none registered)"
        close = difflib.get_close_matches(str(name), list(self._entries), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"Unknown {self.kind} {name!r}.{hint} Valid names: {valid}."

    def names(self) -> list[str]:
        return list(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
