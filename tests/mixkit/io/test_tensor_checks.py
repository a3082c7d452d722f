"""refuse_hollow_tensors / refuse_non_finite_tensors: a stride-0 view or a NaN/inf weight is named; whole, finite
tensors (views into a shared storage included) pass."""

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.io.tensor_checks import refuse_hollow_tensors, refuse_non_finite_tensors


def test_a_broadcast_view_with_more_values_than_its_storage_is_refused():
    hollow = torch.zeros(1, 8).expand(1000, 8)
    with pytest.raises(CheckpointFormatError, match=r"f\.pth.*'w'.*\(1000, 8\).*only 32 bytes"):
        refuse_hollow_tensors("f.pth", {"ok": torch.ones(3), "w": hollow})


def test_whole_tensors_and_views_within_their_storage_pass():
    base = torch.arange(12.0)
    refuse_hollow_tensors("f.pth", {"full": base, "tail": base[4:], "transposed": base.view(3, 4).t(),
                                    "row": torch.arange(4).expand(1, 4), "empty": torch.zeros(0, 5)})


def test_values_are_counted_from_the_views_offset():
    base = torch.arange(4.0)
    refuse_hollow_tensors("f.pth", {"v": torch.as_strided(base, (1,), (1,), 3)})  # the last stored value
    with pytest.raises(CheckpointFormatError, match=r"'v' claims shape \(2,\).*only 4 bytes"):
        refuse_hollow_tensors("f.pth", {"v": torch.as_strided(base, (2,), (0,), 3)})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_weights_are_refused_by_name(bad):
    weights = torch.zeros(3, 3)
    weights[1, 2] = bad
    with pytest.raises(CheckpointFormatError, match=r"f\.pth.*GFPGAN weight 'b'.*NaN or infinite"):
        refuse_non_finite_tensors("f.pth", {"a": torch.ones(2), "b": weights, "c": torch.tensor([bad])}, "GFPGAN")


def test_finite_integer_and_empty_tensors_pass():
    refuse_non_finite_tensors("f.pth", {"a": torch.ones(2, dtype=torch.float16), "steps": torch.tensor(7),
                                        "empty": torch.zeros(0)}, "GFPGAN")
    refuse_non_finite_tensors("f.pth", {}, "GFPGAN")
