"""Reading A1111 hypernetwork files: the MLPs rebuilt with A1111's layout, computed exactly, unsafe files refused."""

from __future__ import annotations

import pickle

import pytest
import torch

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.hypernetworks import load_hypernetwork
from mixkit.testing.tiny_hypernetwork import a1111_mlp_state, write_a1111_hypernetwork


def by_hand(state: dict, x: torch.Tensor, strength: float, activation=torch.relu) -> torch.Tensor:
    """A [1, 2, 1] MLP with an activation after the hidden layer only (activate_output False), as A1111 computes it."""
    hidden = activation(x @ state["linear.0.weight"].T + state["linear.0.bias"])
    return x + (hidden @ state["linear.2.weight"].T + state["linear.2.bias"]) * strength


def test_a_file_is_read_with_its_widths_and_description(tmp_path):
    path = write_a1111_hypernetwork(tmp_path / "anime_3.pt", widths=(32, 64))
    hypernetwork = load_hypernetwork(path)
    assert hypernetwork.name == "anime_3" and hypernetwork.widths == [32, 64]
    assert hypernetwork.layer_structure == (1.0, 2.0, 1.0) and hypernetwork.activation_func == "relu"
    assert hypernetwork.metadata == {"name": "anime_3", "step": 1000, "sd_checkpoint": "925997e9",
                                     "sd_checkpoint_name": "model"}


def test_key_and_value_mlps_compute_x_plus_mlp_times_strength(tmp_path):
    path = write_a1111_hypernetwork(tmp_path / "h.pt", widths=(8,))
    saved = torch.load(path, weights_only=True)
    key_mlp, value_mlp = load_hypernetwork(path).layers[8]
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(key_mlp(x, 0.7), by_hand(saved[8][0], x, 0.7), rtol=0, atol=1e-6)
    torch.testing.assert_close(value_mlp(x, 0.7), by_hand(saved[8][1], x, 0.7), rtol=0, atol=1e-6)
    assert torch.equal(key_mlp(x, 0.0), x)


def test_swish_is_hardswish_as_in_a1111(tmp_path):
    path = write_a1111_hypernetwork(tmp_path / "h.pt", widths=(8,), activation_func="swish")
    saved = torch.load(path, weights_only=True)
    x = torch.randn(1, 2, 8, generator=torch.Generator().manual_seed(2))
    expected = by_hand(saved[8][0], x, 1.0, activation=torch.nn.functional.hardswish)
    torch.testing.assert_close(load_hypernetwork(path).layers[8][0](x), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("options", [
    dict(is_layer_norm=True),  # LayerNorm after every Linear: linear.0, .2 (norm), then .3, .4 (norm)
    dict(layer_structure=(1, 2, 2, 1), use_dropout=True, dropout_structure=[0, 0.3, 0.3, 0]),  # dropout indices
    dict(layer_structure=(1, 1.5, 1), activation_func="leakyrelu", activate_output=True),
    dict(activation_func=None),  # "no activation": Linear, Linear
    dict(activation_func="gelu", is_layer_norm=True, layer_structure=(1, 2, 2, 1), use_dropout=True,
         dropout_structure=[0, 0.1, 0, 0]),
])
def test_layouts_a1111_writes_load_strictly(tmp_path, options):
    path = write_a1111_hypernetwork(tmp_path / "h.pt", widths=(8,), **options)
    mlp = load_hypernetwork(path).layers[8][0]
    assert set(mlp.state_dict()) == set(torch.load(path, weights_only=True)[8][0])


def test_use_dropout_without_a_structure_places_dropout_as_a1111(tmp_path):
    # A1111's parse_dropout_structure for [1, 2, 2, 1], use_dropout, no last_layer_dropout: [0, 0.3, 0, 0], so a
    # Dropout follows the first hidden layer only and shifts the later indices by one
    generator = torch.Generator().manual_seed(0)
    state = a1111_mlp_state(8, (1, 2, 2, 1), dropout_structure=[0, 0.3, 0, 0], generator=generator)
    path = write_a1111_hypernetwork(tmp_path / "h.pt", widths=(8,), layer_structure=(1, 2, 2, 1), use_dropout=True,
                                    extra={8: (state, state)})
    assert sorted(load_hypernetwork(path).layers[8][0].state_dict()) == sorted(state)
    assert "linear.3.weight" in state and "linear.5.weight" in state


def test_the_oldest_files_linear1_linear2_keys_are_renamed(tmp_path):
    generator = torch.Generator().manual_seed(0)
    old = {"linear1.weight": torch.randn(16, 8, generator=generator), "linear1.bias": torch.zeros(16),
           "linear2.weight": torch.randn(8, 16, generator=generator), "linear2.bias": torch.zeros(8)}
    torch.save({8: [old, old]}, tmp_path / "old.pt")  # no description keys: A1111's defaults, no activation
    x = torch.randn(1, 2, 8, generator=generator)
    expected = x + (x @ old["linear1.weight"].T) @ old["linear2.weight"].T
    torch.testing.assert_close(load_hypernetwork(tmp_path / "old.pt").layers[8][0](x), expected, rtol=0, atol=1e-5)


class Payload:
    def __reduce__(self):
        return (print, ("pwned",))


def test_a_pickle_needing_unsafe_globals_is_refused_naming_them(tmp_path):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as handle:
        pickle.dump({8: [{}, {}], "name": Payload()}, handle)
    with pytest.raises(UnsafeCheckpointError, match="print"):
        load_hypernetwork(path)


@pytest.mark.parametrize("extra, message", [
    ({"activation_func": "nosuch"}, "activation_func 'nosuch'"),
    ({"activation_func": "multiheadattention"}, "cannot be built without arguments"),
    ({"layer_structure": [2, 1]}, "must start and end with 1"),
    ({"dropout_structure": [0, 1.5, 0]}, r"dropout_structure \[0.0, 1.5, 0.0\] must have one probability"),
    ({"dropout_structure": ["x", 0, 0]}, "dropout_structure .* is not a list of numbers"),
    ({8: ({}, {})}, r"missing \['linear.0.bias'"),
    ({8: "x"}, "entry 8 must be"),
])
def test_malformed_files_are_refused_naming_the_problem(tmp_path, extra, message):
    path = write_a1111_hypernetwork(tmp_path / "bad.pt", widths=(8,), extra=extra)
    with pytest.raises(CheckpointFormatError, match=message):
        load_hypernetwork(path)


def test_a_file_with_wrong_weight_shapes_is_refused(tmp_path):
    state = a1111_mlp_state(8, (1, 2, 1))
    state["linear.2.weight"] = torch.zeros(8, 3)
    path = write_a1111_hypernetwork(tmp_path / "bad.pt", widths=(8,), extra={8: (state, state)})
    with pytest.raises(CheckpointFormatError, match=r"linear.2.weight is \(8, 3\), expected \(8, 16\)"):
        load_hypernetwork(path)


def test_a_tiny_file_naming_a_huge_width_is_refused_without_allocating_its_layers(tmp_path):
    # 2**20 wide with layer_structure [1, 2, 1] would be two 2**41-element Linear layers (8 TiB each): built before
    # the shape check, the load died with an allocation error (or, a little smaller, took the machine's memory)
    state = a1111_mlp_state(8, (1, 2, 1))
    path = write_a1111_hypernetwork(tmp_path / "huge.pt", widths=(8,), extra={2 ** 20: (state, state)})
    with pytest.raises(CheckpointFormatError, match=r"width 1048576 does not fit .* linear.0.weight is \(16, 8\), "
                                                    r"expected \(2097152, 1048576\)"):
        load_hypernetwork(path)


def test_loaded_weights_are_the_files_values_on_the_cpu(tmp_path):
    state = a1111_mlp_state(8, (1, 2, 1))
    path = write_a1111_hypernetwork(tmp_path / "half.pt", widths=(8,),
                                    extra={8: ({k: v.half() for k, v in state.items()}, state)})
    key_mlp, value_mlp = load_hypernetwork(path).layers[8]
    for mlp in (key_mlp, value_mlp):
        loaded = mlp.state_dict()
        assert {tensor.device.type for tensor in loaded.values()} == {"cpu"}
        assert {tensor.dtype for tensor in loaded.values()} == {torch.float32}
        assert not any(tensor.requires_grad for tensor in mlp.parameters())
    assert torch.equal(value_mlp.state_dict()["linear.2.weight"], state["linear.2.weight"])
    assert torch.equal(key_mlp.state_dict()["linear.2.weight"], state["linear.2.weight"].half().float())


def test_a_file_without_widths_is_refused(tmp_path):
    torch.save({"name": "x", "step": 1}, tmp_path / "empty.pt")
    with pytest.raises(CheckpointFormatError, match="no context-width entries"):
        load_hypernetwork(tmp_path / "empty.pt")
