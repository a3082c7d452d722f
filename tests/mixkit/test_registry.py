"""`Registry.unregister` and aliases: a removed name is gone from lookups and listings, an alias resolves to its entry
without being one; an unknown one is named."""

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


def test_an_alias_resolves_to_its_entry_without_being_listed():
    registry = Registry("upscaler")
    registry.register("DAT x4", 1), registry.register("Lanczos", 2)
    registry.add_alias("DAT_x4", "DAT x4")
    assert registry.get("DAT_x4") == 1 and registry.get("dat_X4") == 1  # exact, then case-insensitive as names
    assert registry.resolve("DAT_x4") == "DAT x4" and registry.resolve("lanczos") == "Lanczos"
    assert "DAT_x4" in registry and "dat_x4" not in registry  # membership is exact, as for names
    assert registry.names() == ["DAT x4", "Lanczos"] and registry.aliases("DAT x4") == ["DAT_x4"]
    registry.add_alias("DAT_x4", "DAT x4")  # the same alias again changes nothing
    registry.add_alias("DAT x4", "DAT x4")  # a name is not its own alias
    assert registry.aliases("DAT x4") == ["DAT_x4"]


def test_an_alias_cannot_take_another_entrys_name_and_goes_with_its_entry():
    registry = Registry("upscaler")
    registry.register("DAT x4", 1), registry.register("Lanczos", 2)
    registry.add_alias("DAT_x4", "DAT x4")
    with pytest.raises(ValueError, match="alias 'Lanczos' is already the name of 'Lanczos'"):
        registry.add_alias("Lanczos", "DAT x4")
    with pytest.raises(ValueError, match="alias 'DAT_x4' is already the name of 'DAT x4'"):
        registry.add_alias("DAT_x4", "Lanczos")
    with pytest.raises(KeyError, match="Unknown upscaler 'SwinIR 4x'"):
        registry.add_alias("SwinIR_4x", "SwinIR 4x")
    with pytest.raises(ValueError, match="'DAT_x4' is already an alias of 'DAT x4'"):
        registry.register("DAT_x4", 3)
    registry.unregister("DAT x4")
    assert "DAT_x4" not in registry and registry.aliases("DAT x4") == []
    with pytest.raises(Exception, match="Unknown upscaler 'DAT_x4'"):
        registry.get("DAT_x4")


def test_registering_over_an_alias_with_replace_makes_it_a_name():
    registry = Registry("upscaler")
    registry.register("DAT x4", 1)
    registry.add_alias("DAT_x4", "DAT x4")
    registry.register("DAT_x4", 3, replace=True)
    assert registry.get("DAT_x4") == 3 and registry.aliases("DAT x4") == [] and registry.names() == ["DAT x4", "DAT_x4"]
