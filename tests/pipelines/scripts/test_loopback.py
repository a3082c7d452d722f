"""Loopback end to end on the tiny SD 1.x model (pipelines/scripts/loopback.py)."""

from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from pipelines.control import GenerationControl
from pipelines.img2img import ImageToImage, Img2ImgParams
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import find_script, loopback
from pipelines.scripts.loopback_config import LoopbackConfig


def noise_picture(seed: int):
    """A 64x64 picture of seeded noise (every loop visibly changes it)."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (64, 64, 3), dtype=np.uint8))


TINY = dict(prompt="a red cat", width=64, height=64, steps=2, seed=5, sampler="Euler", denoising_strength=0.75)


class RecordingPipe:
    """The img2img pipeline, keeping each call's params and result so a test can follow the images through."""

    def __init__(self, pipe):
        self.pipe, self.calls = pipe, []

    def check_inputs(self, params):
        return self.pipe.check_inputs(params)

    def __call__(self, params, callback=None, control=None):
        result = self.pipe(params, callback=callback, control=control)
        self.calls.append((params, result))
        return result


@pytest.fixture(scope="module")
def img2img(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def params(**changes):
    return Img2ImgParams(**{**TINY, "init_images": [noise_picture(3)], **changes})


def test_each_output_is_the_next_init_image_at_the_scheduled_strength(img2img):
    pipe = RecordingPipe(img2img)
    config = LoopbackConfig(loops=3, final_denoising_strength=0.25)
    result = loopback.run(pipe, params(), config)
    assert len(pipe.calls) == 3
    for (_, before), (after, _) in zip(pipe.calls, pipe.calls[1:]):
        assert after.init_images == [before.images[0]]
    assert [call.denoising_strength for call, _ in pipe.calls] == [0.75, 0.5, 0.25]
    assert [call.seed for call, _ in pipe.calls] == [5, 6, 7]
    assert result.index_of_first_image == 1 and len(result.images) == 4
    assert result.images[0].size == (192, 64)  # the three loops in one row
    assert result.images[1:] == [output.images[0] for _, output in pipe.calls]
    texts = [parse_infotext(text) for text in result.infotexts[1:]]
    assert [(t["Denoising strength"], t["Seed"]) for t in texts] == [("0.75", "5"), ("0.5", "6"), ("0.25", "7")]
    assert all((t["Final denoising strength"], t["Denoising curve"]) == ("0.25", "Linear") for t in texts)
    assert result.infotexts[0] == result.infotexts[1] and result.seeds == [5, 5, 6, 7]
    assert result.samples.images == result.images[1:]


def test_batch_count_restarts_each_batch_and_keeps_its_last_image(img2img):
    pipe = RecordingPipe(img2img)
    picture = noise_picture(3)
    result = loopback.run(pipe, params(batch_count=2, batch_size=3, seed=10, init_images=[picture]),
                          LoopbackConfig(loops=2, final_denoising_strength=0.5))
    calls = [call for call, _ in pipe.calls]
    assert [(c.seed, c.denoising_strength, c.batch_size, c.batch_count) for c in calls] == [
        (10, 0.75, 1, 1), (11, 0.5, 1, 1), (12, 0.75, 1, 1), (13, 0.5, 1, 1)]  # seeds go on across batches, as A1111
    assert calls[2].init_images == [picture]
    assert result.images[1:] == [pipe.calls[1][1].images[0], pipe.calls[3][1].images[0]]
    assert result.seeds == [11, 11, 13] and len(result.samples.images) == 4


def test_interrogation_appends_to_the_prompt_of_each_loop(img2img):
    pipe = RecordingPipe(img2img)
    seen = []

    def interrogate(image):
        seen.append(image)
        return f"tags {len(seen)}"

    result = loopback.run(pipe, params(), LoopbackConfig(loops=2, append_interrogation="CLIP"), interrogate=interrogate)
    assert [call.prompt for call, _ in pipe.calls] == ["a red cat, tags 1", "a red cat, tags 2"]
    assert seen[1] is pipe.calls[0][1].images[0]
    assert parse_infotext(result.infotexts[2])["Prompt"] == "a red cat, tags 2"
    loopback.run(pipe, params(prompt=""), LoopbackConfig(loops=1, append_interrogation="CLIP"), interrogate=interrogate)
    assert pipe.calls[-1][0].prompt == "tags 3"


def test_deepbooru_appends_its_tags_and_clip_is_not_asked(img2img):
    pipe = RecordingPipe(img2img)
    seen = []

    def deepbooru(image):
        seen.append(image)
        return "1girl, solo" if len(seen) == 1 else "smile"

    def clip(image):
        raise AssertionError("CLIP asked for a DeepBooru loopback")

    config = LoopbackConfig(loops=2, append_interrogation="DeepBooru")
    result = loopback.run(pipe, params(), config, interrogate=clip, deepbooru=deepbooru)
    assert [call.prompt for call, _ in pipe.calls] == ["a red cat, 1girl, solo", "a red cat, smile"]
    assert seen == [params().init_images[0], pipe.calls[0][1].images[0]]
    assert parse_infotext(result.infotexts[2])["Prompt"] == "a red cat, smile"


def test_masked_content_is_original_after_the_first_loop(img2img):
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 40))
    pipe = RecordingPipe(img2img)
    loopback.run(pipe, params(mask=mask, inpainting_fill="latent noise"), LoopbackConfig(loops=2))
    assert [call.inpainting_fill for call, _ in pipe.calls] == ["latent noise", "original"]


def test_one_loop_has_no_grid(img2img):
    result = loopback.run(img2img, params(), LoopbackConfig(loops=1))
    assert result.index_of_first_image == 0 and len(result.images) == 1


def test_random_seed_is_drawn_once(img2img):
    pipe = RecordingPipe(img2img)
    loopback.run(pipe, params(seed=-1), LoopbackConfig(loops=2))
    first, second = (call.seed for call, _ in pipe.calls)
    assert first != -1 and second == first + 1


def test_interrupt_keeps_the_loops_before_it(img2img):
    control = GenerationControl()
    steps = []

    def stop_in_second_loop(state):
        steps.append(state.batch_index)
        if state.batch_index == 1:
            control.interrupt()

    result = loopback.run(img2img, params(), LoopbackConfig(loops=3), callback=stop_in_second_loop, control=control)
    assert result.interrupted and len(result.images) == 1 and result.index_of_first_image == 0
    assert len(result.samples.images) == 2 and max(steps) == 1  # the interrupted loop is saved, not returned


def test_skip_ends_the_current_batch_only(img2img):
    control = GenerationControl()
    pipe = RecordingPipe(img2img)

    def skip_first_loop(state):
        if state.batch_index == 0 and state.step == 1:
            control.skip()

    result = loopback.run(pipe, params(batch_count=2, steps=3), LoopbackConfig(loops=2), callback=skip_first_loop,
                          control=control)
    assert [call.seed for call, _ in pipe.calls] == [5, 6, 7]  # batch 1 ended at its skipped first loop
    assert pipe.calls[1][0].init_images == params().init_images and not result.interrupted
    assert len(result.images) == 1 and result.images[0] is pipe.calls[2][1].images[0]


@pytest.mark.parametrize("call, message", [
    (lambda: loopback.run(None, Txt2ImgParams(), LoopbackConfig()), "runs for img2img"),
    (lambda: loopback.run(None, params(), LoopbackConfig(append_interrogation="CLIP")),
     "^Loopback: append_interrogation 'CLIP' needs an interrogator"),
    (lambda: loopback.run(None, params(init_images=[noise_picture(1)] * 2, batch_size=2), LoopbackConfig()),
     "give one init image, not 2"),
    (lambda: loopback.planned_params(params(), LoopbackConfig(append_interrogation="CLIP")), "needs an interrogator"),
    (lambda: loopback.run(None, params(), LoopbackConfig(append_interrogation="DeepBooru"), interrogate=str),
     "'DeepBooru' needs a DeepBooru tagger and none is configured: pass deepbooru=<function image -> text> .*"
     "--deepdanbooru-models-path"),
    (lambda: loopback.planned_params(params(), LoopbackConfig(append_interrogation="DeepBooru"), deepbooru=None),
     "needs a DeepBooru tagger"),
    (lambda: loopback.planned_params(params(prompt=["a", "b"]), LoopbackConfig(append_interrogation="DeepBooru"),
                                     deepbooru=str),
     "^Loopback: append_interrogation 'DeepBooru' appends to one prompt"),
])
def test_refused_before_any_work(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_grid_is_size_checked_before_any_work():
    # one batch: the grid of its 32 loops; several: of each batch's last image (100 of 2048x1024 = 210 MP)
    loopback.planned_params(params(width=2048, height=2048), LoopbackConfig(loops=32))  # 134 MP
    with pytest.raises(ValueError, match="Loopback's grid would be about 210 megapixels, more than 200"):
        loopback.planned_params(params(width=2048, height=1024, batch_count=100), LoopbackConfig(loops=2))


def test_a_bad_loop_fails_before_the_first_generation(img2img):
    pipe = RecordingPipe(img2img)
    with pytest.raises(ValueError, match="steps"):
        loopback.run(pipe, params(steps=0), LoopbackConfig(loops=2))
    assert pipe.calls == []


def test_registered_for_img2img_only():
    script = find_script("LOOPBACK", "img2img")
    assert script.run is loopback.run and script.kinds == frozenset({"img2img"})
    with pytest.raises(ValueError, match="runs for img2img, not txt2img"):
        find_script("loopback", "txt2img")
    planned = script.plan(params(batch_count=2), LoopbackConfig(loops=2, final_denoising_strength=0.25))
    assert [(p.seed, p.denoising_strength) for p in planned] == [(5, 0.75), (6, 0.25), (7, 0.75), (8, 0.25)]
    assert replace(planned[0], seed=0).batch_size == 1


def test_color_correction_matches_every_loop_to_the_first_init_image(img2img):
    from pipelines.color_correction import apply_color_correction, color_correction_target

    picture = noise_picture(3).resize((80, 80))  # as given, not resized: A1111's initial_color_corrections
    pipe = RecordingPipe(img2img)
    loopback.run(pipe, params(init_images=[picture], color_correction=True, batch_count=2), LoopbackConfig(loops=2))
    assert len(pipe.calls) == 4 and all(call.color_correction is picture for call, _ in pipe.calls)
    # the second loop starts from the first's corrected output and is itself matched to the first init image
    (first, first_out), (second, second_out) = pipe.calls[:2]
    assert second.init_images == [first_out.images[0]]
    plain = img2img(replace(second, color_correction=False)).images[0]
    expected = apply_color_correction(color_correction_target(picture), plain)
    assert np.array_equal(np.asarray(second_out.images[0]), np.asarray(expected))


def test_without_color_correction_loops_are_not_corrected(img2img):
    pipe = RecordingPipe(img2img)
    loopback.run(pipe, params(), LoopbackConfig(loops=2))
    assert [call.color_correction for call, _ in pipe.calls] == [False, False]


def test_save_before_color_correction_keeps_every_loops_uncorrected_image_in_the_samples(img2img, tmp_path):
    pipe = RecordingPipe(img2img)
    result = loopback.run(pipe, params(color_correction=True, save_images_before_color_correction=True),
                          LoopbackConfig(loops=2))
    outputs = [out for _, out in pipe.calls]
    assert sorted(result.samples.before_color_correction) == [0, 1]
    for index, out in enumerate(outputs):
        assert result.samples.before_color_correction[index] is out.before_color_correction[0]
    paths = result.save(tmp_path)
    assert [path.with_name(f"{path.stem}-before-color-correction.png").is_file() for path in paths] == [True, True]
