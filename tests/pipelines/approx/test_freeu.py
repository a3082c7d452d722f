"""FreeU for one generation, through diffusers' enable_freeu: restored exactly, b = s = 1 is off, infotext round
trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.approx.freeu import FreeU, as_freeu, freeu_call

SMALL = dict(prompt="a red circle", width=64, height=64, steps=3, seed=3, sampler="Euler")


def _freeu_state(unet):
    return [{key: block.__dict__.get(key) for key in ("b1", "b2", "s1", "s2")} for block in unet.up_blocks]


def _unet_output(model):
    generator = torch.Generator().manual_seed(0)
    sample, context = torch.randn(1, 4, 16, 16, generator=generator), torch.randn(1, 77, 32, generator=generator)
    with torch.no_grad():
        return model.unet(sample, 500, context).sample


def test_freeu_changes_the_image_for_the_call_only(sd1_pipe):
    before = _freeu_state(sd1_pipe.model.unet)
    plain = np.asarray(sd1_pipe(**SMALL).images[0]).astype(int)
    result = sd1_pipe(**SMALL, freeu=(1.5, 1.6, 0.9, 0.2))
    assert np.abs(np.asarray(result.images[0]).astype(int) - plain).max() > 0
    assert "FreeU: \"b1=1.5, b2=1.6, s1=0.9, s2=0.2\"" in result.infotexts[0]
    assert _freeu_state(sd1_pipe.model.unet) == before
    assert np.array_equal(np.asarray(sd1_pipe(**SMALL).images[0]), plain)


def test_an_earlier_freeu_state_comes_back_exactly_also_after_a_failure(sd1_pipe):
    unet = sd1_pipe.model.unet
    unet.enable_freeu(s1=0.5, s2=0.5, b1=1.1, b2=1.1)
    try:
        earlier = _freeu_state(unet)
        with pytest.raises(RuntimeError, match="broke"):
            with freeu_call(sd1_pipe.model, FreeU()):
                assert _freeu_state(unet)[0] == {"b1": 1.5, "b2": 1.6, "s1": 0.9, "s2": 0.2}
                raise RuntimeError("broke")
        assert _freeu_state(unet) == earlier
    finally:
        unet.disable_freeu()
        for block in unet.up_blocks:
            for key in ("b1", "b2", "s1", "s2"):
                block.__dict__.pop(key, None)


def test_b_and_s_at_one_equal_freeu_off(sd1_pipe):
    plain = _unet_output(sd1_pipe.model)
    with freeu_call(sd1_pipe.model, FreeU(1, 1, 1, 1)):
        neutral = _unet_output(sd1_pipe.model)
    with freeu_call(sd1_pipe.model, FreeU()):
        changed = _unet_output(sd1_pipe.model)
    torch.testing.assert_close(neutral, plain, rtol=0, atol=1e-5)  # the skip filter's FFT round trip only
    assert (changed - plain).abs().max() > 1e-3


def test_infotext_round_trip_and_bad_values():
    from pipelines.infotext import split_infotext

    settings = FreeU(1.3, 1.4, 0.9, 0.2)
    assert FreeU.from_infotext(settings.infotext_value()) == settings
    text = f'p\nSteps: 2, Sampler: Euler, Seed: 1, FreeU: "{settings.infotext_value()}"'
    assert FreeU.from_infotext(split_infotext(text)[2]["FreeU"]) == settings
    with pytest.raises(ValueError, match="lacks"):
        FreeU.from_infotext("b1=1, b2=1")
    with pytest.raises(ValueError, match="is not 'b1=..."):
        FreeU.from_infotext("1.3, 1.4, 0.9, 0.2")
    with pytest.raises(ValueError, match=r"FreeU s2 must be a number in \(0, 10\]"):
        FreeU(1, 1, 1, 0)
    with pytest.raises(TypeError, match="freeu must be None"):
        as_freeu((1, 2))
    assert as_freeu({"b1": 1.2}) == FreeU(b1=1.2)


def test_a_model_without_a_unet_decoder_is_refused(sd1_pipe, monkeypatch):
    import pipelines.base

    monkeypatch.setitem(sd1_pipe.model.extras, "execution_backend", "openvino")
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: pytest.fail("sampled"))
    with pytest.raises(ValueError, match="FreeU re-weights a diffusers U-Net"):
        sd1_pipe(**SMALL, freeu=FreeU())


@pytest.mark.parametrize("text, named", [("b1=1e, b2=1, s1=1, s2=1", "b1='1e'"),
                                         ("b1=1, b2=1, s1=0.9, s2=0.2.1", "s2='0.2.1'")])
def test_a_malformed_number_in_the_infotext_is_named_by_key_and_value(text, named):
    with pytest.raises(ValueError) as error:
        FreeU.from_infotext(text)
    assert str(error.value) == (f"infotext FreeU: {named} is not a number (in {text!r}); write it as A1111 does, "
                                f"e.g. {named.split('=')[0]}=1.5")
