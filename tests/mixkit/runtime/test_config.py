import pytest

from mixkit.errors import UnknownNameError
from mixkit.runtime.config import PRESETS, RuntimeConfig


def test_presets_registered():
    assert PRESETS.names() == ["exact", "fast", "low-memory"]


def test_exact_preset_changes_nothing():
    assert PRESETS.get("exact") == RuntimeConfig()


def test_unknown_preset_lists_valid_names():
    with pytest.raises(UnknownNameError, match="'fast'"):
        PRESETS.get("fastest")


@pytest.mark.parametrize("field, value", [("unet_precision", "bf16"), ("vae_precision", "half"), ("offload", "disk")])
def test_invalid_values_name_field_and_allowed(field, value):
    with pytest.raises(ValueError, match=f"{field}={value!r}.*allowed"):
        RuntimeConfig(**{field: value})
