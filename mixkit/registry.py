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
    """Maps names to entries; lookups are exact first, then case-insensitive.

    An alias is a second name for one entry (A1111 knows a downloaded upscaler by its display name and its file stem):
    it resolves like the name but is not an entry, so `names()` lists each entry once.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}  # alias -> the name it stands for

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
        if name in self._aliases:
            if not replace:
                raise ValueError(f"{self.kind} {name!r} is already an alias of {self._aliases[name]!r}; pass "
                                 "replace=True to make it a name of its own")
            del self._aliases[name]
        self._entries[name] = entry
        return entry

    def add_alias(self, alias: str, name: str) -> None:
        """Let `alias` resolve to the entry registered as `name`; refused if `alias` already means something else."""
        if name not in self._entries:
            raise KeyError(self.unknown_message(name))
        if not isinstance(alias, str) or not alias.strip():
            raise ValueError(f"{self.kind} alias must be a non-empty string, got {alias!r}")
        taken = alias if alias in self._entries else self._aliases.get(alias)
        if taken is not None and taken != name:
            raise ValueError(f"{self.kind} alias {alias!r} is already the name of {taken!r}")
        if alias != name:
            self._aliases[alias] = name

    def aliases(self, name: str) -> list[str]:
        """The aliases of the entry registered as `name`, in the order they were added."""
        return [alias for alias, target in self._aliases.items() if target == name]

    def resolve(self, name: str) -> str:
        """The registered name that `name` (a name or an alias, exact or in another case) stands for."""
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        if isinstance(name, str):
            folded = {key.casefold(): key for key in self._entries}
            folded_aliases = {key.casefold(): target for key, target in self._aliases.items()}
            if name.casefold() in folded:
                return folded[name.casefold()]
            if name.casefold() in folded_aliases:
                return folded_aliases[name.casefold()]
        raise UnknownNameError(self.unknown_message(name))

    def unregister(self, name: str) -> T:
        """Remove and return the entry registered under exactly `name` (a refreshed folder's removed file), and its
        aliases."""
        if name not in self._entries:
            raise KeyError(self.unknown_message(name))
        for alias in self.aliases(name):
            del self._aliases[alias]
        return self._entries.pop(name)

    def get(self, name: str) -> T:
        if name in self._entries:
            return self._entries[name]
        return self._entries[self.resolve(name)]

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
        """Whether `name` is exactly a registered name or alias."""
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
