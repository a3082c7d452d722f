"""A refiner on an optimised model runs optimised the same way, or is refused before any work.

QA: with `low-memory` the refiner was loaded as a full float32 torch model (no float16 storage, no slicing), and
on OpenVINO it ran eagerly on torch, while every image's `Optimization:` label named the base model's preset and
backend. A1111 loads its refiner through the same `load_model` path as the base, with the same memory options.
"""

import pytest

from pipelines.hires import HiresFix
from pipelines.infotext import parse_optimization
from pipelines.optimize import load_options_for, optimize
from pipelines.txt2img import TextToImage

CALL = dict(prompt="a red cube", negative_prompt="blurry", width=64, height=64, steps=4, seed=7,
            refiner_switch_at=0.5)


@pytest.fixture(scope="module")
def refiner_dir(tmp_path_factory):
    from mixkit.testing.tiny_models import build_tiny_sd1

    return build_tiny_sd1(tmp_path_factory.mktemp("tiny-sd1-refiner"), seed=1)


def _low_memory(path):
    pipe = TextToImage.from_pretrained(path, **load_options_for("low-memory"))
    optimize(pipe, "low-memory")
    return pipe


def _spy_refiner_unet(monkeypatch):
    """Counts the refiner UNet's calls: a refused call must not load or run it."""
    import pipelines.refiner as refiner

    loads = []
    original = refiner.RefinerSlot.session
    monkeypatch.setattr(refiner.RefinerSlot, "session", lambda self, *a: loads.append(a) or original(self, *a))
    return loads


def test_a_refiner_path_on_a_low_memory_model_is_refused_before_any_work(tiny_sd1_dir, refiner_dir, monkeypatch):
    pipe = _low_memory(tiny_sd1_dir)
    loads = _spy_refiner_unet(monkeypatch)
    calls = []
    pipe.model.unet.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(ValueError, match=r"refiner='.*' would run unoptimised .*preset 'low-memory', backend 'torch'"
                                         r".*optimize\(refiner_pipe, 'low-memory'"):
        pipe(**CALL, refiner=str(refiner_dir))
    assert loads == [] and calls == []
    with pytest.raises(ValueError, match="would run unoptimised"):  # the hires fix checks before its first pass
        HiresFix(pipe)(**CALL, refiner=str(refiner_dir), hr_scale=1.5)
    assert loads == [] and calls == []


def test_a_refiner_optimised_the_same_way_runs_and_keeps_its_optimisation(tiny_sd1_dir, refiner_dir):
    pipe, refiner = _low_memory(tiny_sd1_dir), _low_memory(refiner_dir)
    result = pipe(**CALL, refiner=refiner)
    assert "Refiner: " in result.infotexts[0]
    assert parse_optimization(result.infotexts[0]).exact[0] == "low-memory"
    # the refiner that ran is the one given, with its own low-memory optimisation (not a float32 copy of it)
    assert pipe.session.refiner_slot.session(refiner, pipe.session).model is refiner.model


def test_a_refiner_optimised_differently_is_refused(tiny_sd1_dir, refiner_dir):
    pipe, plain = _low_memory(tiny_sd1_dir), TextToImage.from_pretrained(refiner_dir)
    with pytest.raises(ValueError, match="refiner=TextToImage would run unoptimised"):
        pipe(**CALL, refiner=plain)


def test_the_base_model_as_its_own_refiner_is_not_refused(tiny_sd1_dir):
    """A1111 has nothing to switch to, and writes no Refiner keys: nothing is unoptimised."""
    pipe = _low_memory(tiny_sd1_dir)
    assert "Refiner" not in pipe(**CALL, refiner=pipe).infotexts[0]
    assert "Refiner" not in pipe(**CALL, refiner=str(tiny_sd1_dir)).infotexts[0]


def test_an_unoptimised_or_exact_model_takes_any_refiner(tiny_sd1_dir, refiner_dir):
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    optimize(pipe, "exact")  # changes nothing: nothing is labelled
    assert "Refiner: " in pipe(**CALL, refiner=str(refiner_dir)).infotexts[0]


def test_a_refiner_on_openvino_is_refused_even_when_optimised_alike(tiny_sd1_dir, refiner_dir, tmp_path):
    pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")
    pipe, refiner = TextToImage.from_pretrained(tiny_sd1_dir), TextToImage.from_pretrained(refiner_dir)
    optimize(pipe, "exact", backend="openvino", cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"backend 'openvino'\); load the base model without optimize\(\)"):
        pipe(**CALL, refiner=refiner)
