"""The settings of A1111's Create hypernetwork: read as A1111 reads them, refused with the rule when they break it."""

from __future__ import annotations

import pytest

from mixkit.hypernetworks.shape import WEIGHT_INITS, HypernetworkShape, buildable_activations, check_name


def test_a1111_text_fields_are_read_as_its_create_reads_them():
    shape = HypernetworkShape(enable_sizes=["768", "320"], layer_structure="1, 1.5, 2, 1", use_dropout=True,
                              dropout_structure="0, 0.3, 0.15, 0")
    shape.check_shape()
    assert shape.context_widths() == [768, 320]
    assert shape.layers() == [1.0, 1.5, 2.0, 1.0]
    assert shape.dropouts() == [0.0, 0.3, 0.15, 0.0]
    assert HypernetworkShape(enable_sizes="768, 1024").context_widths() == [768, 1024]
    assert HypernetworkShape(enable_sizes=640).context_widths() == [640]
    assert HypernetworkShape(layer_structure=[1, 2, 1]).dropouts() == [0.0, 0.0, 0.0]  # without use_dropout


def test_defaults_are_a1111s_create_tab():
    shape = HypernetworkShape()
    shape.check_shape()
    assert (shape.context_widths(), shape.layers(), shape.activation_func, shape.weight_init, shape.add_layer_norm,
            shape.use_dropout, shape.activate_output) == ([768, 320, 640, 1280], [1.0, 2.0, 1.0], "linear", "Normal",
                                                          False, False, False)


def test_the_activation_list_is_a1111s():
    names = buildable_activations()
    assert names[:7] == ["linear", "relu", "leakyrelu", "elu", "swish", "tanh", "sigmoid"]
    assert {"gelu", "silu", "mish", "softplus"} <= set(names)
    assert "multiheadattention" not in names and "threshold" not in names  # they need arguments
    assert "glu" not in names  # it halves the width, so the next layer could not take it


@pytest.mark.parametrize("settings, message", [
    (dict(layer_structure="1, 2"), "must start and end with 1"),
    (dict(layer_structure="2, 2, 1"), "must start and end with 1"),
    (dict(layer_structure="1"), "must start and end with 1"),
    (dict(layer_structure="1, 0, 1"), "every size must be positive"),
    (dict(layer_structure="1, two, 1"), "'two' is not a number"),
    (dict(layer_structure="1, nan, 1"), "'nan' is not a number"),
    (dict(layer_structure=[1, float("inf"), 1]), "inf is not a number"),
    (dict(activation_func="swiish"), "choose one of linear, relu, leakyrelu, elu, swish, tanh, sigmoid"),
    (dict(weight_init="Kaiming"), "choose one of " + ", ".join(WEIGHT_INITS)),
    (dict(enable_sizes=[]), "non-empty list"),
    (dict(enable_sizes=[768, 0]), "entry 0 must be a context width"),
    (dict(enable_sizes=[768, "wide"]), "entry 'wide'"),
    (dict(enable_sizes=[768, 768]), "names a width twice"),
    (dict(use_dropout=True), "use_dropout needs dropout_structure"),
    (dict(use_dropout=True, dropout_structure="0, 0.3"), "it needs one per layer_structure entry (3)"),
    (dict(use_dropout=True, dropout_structure="0.1, 0.3, 0"), "must start and end with 0"),
    (dict(use_dropout=True, dropout_structure="0, 1, 0"), "probabilities in [0, 1)"),
    (dict(dropout_structure="0, 0.3, 0"), "use_dropout is false"),
    (dict(add_layer_norm="yes"), "add_layer_norm must be true or false"),
])
def test_bad_settings_are_refused_naming_the_rule(settings, message):
    with pytest.raises((ValueError, TypeError)) as error:
        HypernetworkShape(**settings).check_shape()
    assert message in str(error.value)


def test_unknown_activation_lists_every_valid_name():
    with pytest.raises(ValueError) as error:
        HypernetworkShape(activation_func="nope").check_shape()
    assert all(name in str(error.value) for name in buildable_activations())


@pytest.mark.parametrize("name", ["", " ", "a/b", "my:style", "x*y"])
def test_names_a1111_would_change_are_refused(name):
    with pytest.raises(ValueError):
        check_name(name)


def test_names_a1111_keeps_are_accepted():
    check_name("My style_v2.1 - final")
