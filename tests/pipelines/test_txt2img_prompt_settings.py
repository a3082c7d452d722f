"""Per-call prompt settings A1111 keeps in its Settings: emphasis mode (`emphasis`, written to the infotext as
"Emphasis" when not "Original" and a text has brackets, as `sd_hijack_clip` forward does) and the comma
backtrack (`comma_padding_backtrack`); one prompt-length limit; the embeddings folder rescanned before every call
(A1111's `load_textual_inversion_embeddings()` in `processing`); the hires-pass schedule hook."""

import os

import pytest
import torch

from mixkit.prompts import MAX_PROMPT_CHARS
from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
from pipelines.txt2img import TextToImage

from .unet_spy import recorded_unet_contexts

SMALL = dict(width=64, height=64, steps=2, seed=9, sampler="Euler")


def unet_contexts(pipe, **kwargs):
    with recorded_unet_contexts(pipe) as seen:
        result = pipe(**{**SMALL, **kwargs})
    return seen, result


def test_emphasis_mode_changes_the_conditioning_and_is_recorded(sd1_pipe):
    prompt = "a (red:1.5) circle"
    no_norm, result = unet_contexts(sd1_pipe, prompt=prompt, emphasis="no norm")
    assert "Emphasis: No norm" in result.infotexts[0]
    ignore, result = unet_contexts(sd1_pipe, prompt=prompt, emphasis="Ignore")
    assert "Emphasis: Ignore" in result.infotexts[0]
    assert not torch.equal(no_norm[0], ignore[0])
    plain, _ = unet_contexts(sd1_pipe, prompt="a red circle", emphasis="Ignore")
    assert torch.equal(plain[0][0], unet_contexts(sd1_pipe, prompt="a red circle")[0][0][0])


@pytest.mark.parametrize("emphasis, prompt, negative, written", [
    ("Original", "a (red:1.5) circle", "", False),  # A1111 never writes its default
    ("No norm", "a red circle", "", False),  # no "(" or "[" in any text: nothing to record
    ("No norm", "a red circle", "(ugly)", True),  # the negative prompt's texts count too
    ("None", "[red:blue:1]", "", False),  # the schedule's texts ("red", "blue") have no brackets
    ("None", "[(red):blue:1]", "", True),
])
def test_the_emphasis_key_is_written_as_a1111_does(sd1_pipe, emphasis, prompt, negative, written):
    result = sd1_pipe(prompt=prompt, negative_prompt=negative, emphasis=emphasis, **SMALL)
    assert (f"Emphasis: {emphasis}" in result.infotexts[0]) is written


def test_comma_padding_backtrack_moves_the_text_after_the_last_comma(sd1_pipe):
    prompt = " ".join(["a"] * 70) + ", " + " ".join(["x"] * 10)  # one token each (tiny tokenizer): comma at 71
    encoder = sd1_pipe.session.encoder(1)
    assert [len(chunk.tokens) for chunk in encoder.chunks_for(prompt)] == [71, 10]
    default, _ = unet_contexts(sd1_pipe, prompt=prompt)
    off, _ = unet_contexts(sd1_pipe, prompt=prompt, comma_padding_backtrack=0)
    assert default[0].shape == off[0].shape and not torch.equal(default[0], off[0])
    wider, _ = unet_contexts(sd1_pipe, prompt=prompt, comma_padding_backtrack=20)
    assert torch.equal(default[0], wider[0])


def test_clip_skip_sdxl_reaches_the_encoder(sdxl_pipe):
    """A1111's "Clip skip SDXL": with it, clip skip 3 moves CLIP-L's layer (mixkit.prompts tests check which);
    without it SDXL ignores clip skip, as A1111 1.10 does."""
    plain, _ = unet_contexts(sdxl_pipe, prompt="a red circle", clip_skip=3)
    assert torch.equal(plain[0], unet_contexts(sdxl_pipe, prompt="a red circle")[0][0])
    moved, result = unet_contexts(sdxl_pipe, prompt="a red circle", clip_skip=3, sdxl_clip_l_skip=True)
    expected = sdxl_pipe.session.encoder(3, sdxl_clip_l_skip=True).encode("a red circle").hidden
    assert any(torch.equal(row, expected) for row in moved[0]) and not torch.equal(moved[0], plain[0])
    assert "Clip skip: 3" in result.infotexts[0]


def test_clip_skip_changed_between_calls_is_never_answered_from_the_cache(sdxl_pipe):
    """One SDXL pipeline, the same prompt, clip skip 1, 2, 1 (with "Clip skip SDXL"): each call gets its own clip
    skip's conditioning, as a pipeline built for it would, however the session caches encoders and encodings."""
    from pipelines.txt2img import TextToImage

    calls = [unet_contexts(sdxl_pipe, prompt="a red circle", clip_skip=skip, sdxl_clip_l_skip=True)[0][0]
             for skip in (1, 2, 1)]
    fresh = unet_contexts(TextToImage(sdxl_pipe.model), prompt="a red circle", clip_skip=2, sdxl_clip_l_skip=True)[0][0]
    assert not torch.equal(calls[0], calls[1])
    assert torch.equal(calls[1], fresh) and torch.equal(calls[2], calls[0])


@pytest.mark.parametrize("values, error, message", [
    (dict(emphasis="Orginal"), ValueError, "Did you mean 'Original'"),
    (dict(emphasis=None), TypeError, "emphasis must be a mode name"),
    (dict(comma_padding_backtrack=75), ValueError, "comma_padding_backtrack must be an int in 0..74"),
    (dict(comma_padding_backtrack=-1), ValueError, "comma_padding_backtrack"),
    (dict(sdxl_clip_l_skip="yes"), TypeError, "sdxl_clip_l_skip must be True or False"),
])
def test_bad_settings_are_refused_before_any_work(values, error, message):
    with pytest.raises(error, match=message):
        check_txt2img_params(Txt2ImgParams(prompt="a", **values), GenerationLimits())


def test_one_prompt_length_limit():
    check_txt2img_params(Txt2ImgParams(prompt="a " * 16_250), GenerationLimits())  # 32,500 characters
    with pytest.raises(ValueError, match="32,768"):
        check_txt2img_params(Txt2ImgParams(prompt="a" * (MAX_PROMPT_CHARS + 1)), GenerationLimits())
    with pytest.raises(ValueError, match="max_prompt_chars must be an int in"):
        GenerationLimits(max_prompt_chars=40_000)


def test_and_parts_are_bounded_in_the_prompt_only():
    limits = GenerationLimits(max_and_parts=3)
    check_txt2img_params(Txt2ImgParams(prompt="a AND b AND c"), limits)
    with pytest.raises(ValueError, match=r"prompt has 4 AND parts; the limit is 3 \(GenerationLimits.max_and_parts\)"):
        check_txt2img_params(Txt2ImgParams(prompt="a AND b AND c AND d"), limits)
    with pytest.raises(ValueError, match="prompt has 4 AND parts"):  # each image's prompt of a batch
        check_txt2img_params(Txt2ImgParams(prompt=["a", "a AND b AND c AND d"], batch_size=2), limits)
    # A1111 never splits a negative prompt on AND: there it is a word
    check_txt2img_params(Txt2ImgParams(prompt="a", negative_prompt=" AND ".join("x" * 10)), limits)
    assert GenerationLimits().max_and_parts == 32


def test_hires_prompt_and_parts_are_bounded():
    from pipelines.hires import HiresParams, check_hires_params

    limits = GenerationLimits(max_and_parts=2)
    check_hires_params(HiresParams(prompt="a", width=64, height=64, hr_prompt="a AND b"), limits, 8)
    with pytest.raises(ValueError, match="hr_prompt has 3 AND parts; the limit is 2"):
        check_hires_params(HiresParams(prompt="a", width=64, height=64, hr_prompt="a AND b AND c"), limits, 8)


def test_embeddings_added_replaced_or_removed_apply_at_the_next_call(sd1_pipe, tmp_path):
    pipe = TextToImage(sd1_pipe.model, embeddings_dir=tmp_path)
    before = pipe(prompt="a newstyle circle", **SMALL)
    assert "TI hashes" not in before.infotexts[0]
    path = tmp_path / "newstyle.pt"
    torch.save({"string_to_param": {"*": torch.randn(2, 32, generator=torch.Generator().manual_seed(1))}}, path)
    added = pipe(prompt="a newstyle circle", **SMALL)
    assert 'TI hashes: "newstyle: ' in added.infotexts[0]
    assert added.images[0].tobytes() != before.images[0].tobytes()
    torch.save({"string_to_param": {"*": torch.randn(2, 32, generator=torch.Generator().manual_seed(2))}}, path)
    os.utime(path, ns=(10**9, 10**9))
    replaced = pipe(prompt="a newstyle circle", **SMALL)
    assert replaced.infotexts[0] != added.infotexts[0]  # the new file's hash
    assert replaced.images[0].tobytes() != added.images[0].tobytes()
    path.unlink()
    removed = pipe(prompt="a newstyle circle", **SMALL)
    assert "TI hashes" not in removed.infotexts[0]
    assert removed.images[0].tobytes() == before.images[0].tobytes()


def test_a_pass_that_names_its_first_pass_gets_a1111s_hires_schedules(sd1_pipe, monkeypatch):
    """`_schedule_steps` is the hook the hires-fix second pass overrides (pipelines/hires.py `_SecondPass`)."""
    import pipelines.base

    plans = []
    original = pipelines.base.run_sampler
    monkeypatch.setattr(pipelines.base, "run_sampler", lambda request: plans.append(request.plan) or original(request))

    class AfterFirstPass(TextToImage):
        def _schedule_steps(self, params, sampler):
            return params.steps * sampler.calls_per_step, 20 * sampler.calls_per_step

    hires_pass = AfterFirstPass.from_pipeline(sd1_pipe)
    hires_pass(prompt="a [red:blue:0.5] [cat:dog:22] circle", steps=4, width=64, height=64, seed=1, sampler="Euler")
    sd1_pipe(prompt="a [red:blue:0.5] [cat:dog:22] circle", steps=4, width=64, height=64, seed=1, sampler="Euler")
    hires_plan, first_plan = plans
    # hires: 0.5 lies in the first pass (blue throughout); 22 is step 2 of the hires pass
    assert [hires_plan.texts_at(step)[0] for step in range(5)] == ["a blue cat circle"] * 3 + ["a blue dog circle"] * 2
    assert [first_plan.texts_at(step)[0] for step in range(5)] == ["a red cat circle"] * 3 + ["a blue cat circle"] * 2
