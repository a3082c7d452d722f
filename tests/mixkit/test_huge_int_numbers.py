"""A 400-digit int (a JSON request, a config file or a `--set` can carry one) given to mixkit's number settings is
refused with the setting's own ValueError, never an OverflowError from math.isfinite."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

HUGE = 10 ** 400


def _hypernetwork_strength():
    from mixkit.hypernetworks.apply import check_hypernetwork_strength

    check_hypernetwork_strength(HUGE, "hn")


def _lora_te_weight():
    from mixkit.lora.requests import LoraRequest

    LoraRequest("some_lora", te_weight=HUGE)


def _lora_unet_weight():
    from mixkit.lora.requests import LoraRequest

    LoraRequest("some_lora", unet_weight=-HUGE)


def _tiny_recipe_float():
    from mixkit.tiny.recipe_clip import TinyClipRecipe
    from mixkit.tiny.recipe_common import check_recipe_types

    check_recipe_types(TinyClipRecipe(learning_rate=HUGE))


def _training_non_negative():
    from mixkit.training.config_checks import check_non_negative_numbers

    check_non_negative_numbers(SimpleNamespace(max_grad_norm=HUGE), ("max_grad_norm",))


def _training_interval():
    from mixkit.training.config_checks import check_number_in

    check_number_in(SimpleNamespace(dropout=HUGE), "dropout", "[0, inf)")


@pytest.mark.parametrize("check, message", [
    (_hypernetwork_strength, "hypernetwork 'hn': strength must be a finite number, got 1000"),
    (_lora_te_weight, "LoraRequest.te_weight must be a finite number, got 1000"),
    (_lora_unet_weight, "LoraRequest.unet_weight must be a finite number, got -1000"),
    (_tiny_recipe_float, "learning_rate must be a finite number"),
    (_training_non_negative, "max_grad_norm must be a finite number >= 0, got 1000"),
    (_training_interval, r"dropout must be a number in \[0, inf\), got 1000"),
], ids=lambda value: getattr(value, "__name__", ""))
def test_a_huge_int_is_refused_with_the_settings_message(check, message):
    with pytest.raises(ValueError, match=message):
        check()
