"""`Registry.unregister`: a removed name is gone from lookups and listings; an unknown one is named."""

import pytest

from mixkit.registry import Registry


def test_unregister_removes_exactly_that_name():
    registry = Registry("upscaler")
    registry.register("a", 1), registry.register("b", 2)
    assert registry.unregister("a") == 1
    assert registry.names() == ["b"] and "a" not in registry
    with pytest.raises(KeyError, match="Unknown upscaler 'a'.*Valid names: 'b'"):
        registry.unregister("a")
    with pytest.raises(KeyError):
        registry.unregister("B")  # removal is exact, unlike a case-insensitive lookup
