"""The cap on the images one script job generates in all, from every script's plan and run, before the first image
(pipelines/scripts/image_budget.py)."""

import re

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage, Img2ImgParams
from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES, GenerationLimits, Txt2ImgParams
from pipelines.scripts import loopback, prompt_matrix, prompts_from_file, sd_upscale, xyz_plot
from pipelines.scripts.image_budget import script_image_cap
from pipelines.scripts.loopback_config import LoopbackConfig
from pipelines.scripts.prompts_from_file import prompts_config
from pipelines.txt2img import TextToImage

TINY = dict(prompt="a cat|red|blue", width=64, height=64, steps=1, seed=5, sampler="Euler")
PICTURE = Image.fromarray(np.random.default_rng(3).integers(0, 256, (48, 48, 3), dtype=np.uint8))


def txt2img_params(**changes):
    return Txt2ImgParams(**{**TINY, **changes})


def img2img_params(**changes):
    return Img2ImgParams(**{**TINY, "prompt": "a cat", "denoising_strength": 0.5, "init_images": [PICTURE],
                            **changes})


# Each script but Prompt matrix (2^n images) with a job of exactly 12 images: (module, params, config, what the
# error says the 12 are made of)
JOBS_OF_12 = {
    "X/Y/Z plot": (xyz_plot, lambda: txt2img_params(prompt="a cat", batch_size=2, batch_count=2),
                   lambda: xyz_plot.xyz_config(("Seed", "1-3")), "3 cells x their batch size x batch count"),
    "Prompts from file": (prompts_from_file, lambda: txt2img_params(prompt="", batch_size=3, batch_count=2),
                          lambda: prompts_config("a dog\na fox"), "2 lines x each line's batch size x batch count"),
    "Loopback": (loopback, lambda: img2img_params(batch_count=3), lambda: LoopbackConfig(loops=4),
                 "4 loops x batch count 3"),
    "SD upscale": (sd_upscale, lambda: img2img_params(batch_count=3),
                   lambda: sd_upscale.sd_upscale_config(2, "Lanczos", 8),
                   "4 tiles of the 96x96 upscale x batch count 3"),
}


def job(name):
    module, params, config, made_of = JOBS_OF_12[name]
    return module, params(), config(), made_of


MATRIX_OF_32 = "a cat|red|blue|big|small|old"  # five optional parts: 2^5 combinations, one image each


def test_the_sd_upscale_job_has_the_tiles_its_error_names():
    plan = sd_upscale.check_sd_upscale(img2img_params(batch_count=3), sd_upscale.sd_upscale_config(2, "Lanczos", 8))
    assert (plan.tile_count, plan.width, plan.height, plan.iterations) == (4, 96, 96, 3)


@pytest.mark.parametrize("name", list(JOBS_OF_12))
def test_each_plan_refuses_a_job_over_the_cap_naming_count_cap_and_how_to_raise_it(name):
    module, params, config, made_of = job(name)
    with pytest.raises(ValueError) as refused:
        module.planned_params(params, config, max_script_images=11)
    message = str(refused.value)
    assert f"would generate 12 images ({made_of}), more than the 11 one script job may make" in message
    assert message.endswith("or raise the cap: --max-script-images N (on `mixkit webui` for a server, or on `mixkit "
                            "generate` / `mixkit img2img`); from Python GenerationLimits(max_script_images=N) on the "
                            "pipeline, or max_script_images=N to the script.")
    assert len(module.planned_params(params, config, max_script_images=12)) > 0  # the cap itself is allowed


def test_the_matrix_counts_one_image_per_combination_whatever_its_batch_size():
    config = prompt_matrix.PromptMatrixConfig()
    for batch_size in (1, 5):
        params = txt2img_params(prompt=MATRIX_OF_32, batch_size=batch_size)
        with pytest.raises(ValueError, match=re.escape("Prompt matrix would generate 32 images (one per combination "
                                                       "of the '|' parts: 32), more than the 31")):
            prompt_matrix.planned_params(params, config, max_script_images=31)
        planned = prompt_matrix.planned_params(params, config, max_script_images=32)
        assert sum(call.batch_size * call.batch_count for call in planned) == 32


def test_the_default_cap_lets_normal_jobs_through_and_stops_a_huge_list():
    assert DEFAULT_MAX_SCRIPT_IMAGES == GenerationLimits().max_script_images == 10_000
    lines = "\n".join(f"line {n}" for n in range(7))
    at_most = txt2img_params(prompt="", batch_size=16, batch_count=89)  # 7 x 16 x 89 = 9,968
    assert len(prompts_from_file.planned_params(at_most, prompts_config(lines))) == 7
    huge = txt2img_params(prompt="", batch_size=16, batch_count=90)  # 10,080
    with pytest.raises(ValueError, match="would generate 10,080 images .*more than the 10,000"):
        prompts_from_file.planned_params(huge, prompts_config(lines))
    # a line's own --n_iter / --batch_size count too
    with pytest.raises(ValueError, match="would generate 11,200 images"):
        prompts_from_file.planned_params(txt2img_params(prompt=""),
                                         prompts_config("--n_iter 100 --batch_size 16 --prompt x\n" * 7))


def test_a_1000_cell_plot_at_batch_10_is_refused_by_default():
    config = xyz_plot.xyz_config(("Seed", "1-1000"))
    params = txt2img_params(prompt="a cat", batch_size=5, batch_count=2)  # 10,000: allowed
    assert len(xyz_plot.planned_params(params, config)) == 1000
    with pytest.raises(ValueError, match="would generate 11,000 images"):
        xyz_plot.planned_params(txt2img_params(prompt="a cat", batch_size=11), config)


@pytest.fixture(scope="module")
def capped(sd1_pipe):
    """The shared tiny model behind txt2img and img2img pipelines whose limits allow 11 script images."""
    limits = GenerationLimits(max_script_images=11)
    return {"txt2img": TextToImage.from_pipeline(sd1_pipe, limits=limits),
            "img2img": ImageToImage.from_pipeline(sd1_pipe, limits=limits)}


@pytest.mark.parametrize("name", [*JOBS_OF_12, "Prompt matrix"])
def test_each_run_refuses_a_job_over_its_pipelines_cap_before_the_unet_runs(name, capped, sd1_pipe):
    if name == "Prompt matrix":  # 32 images
        module, params, config = prompt_matrix, txt2img_params(prompt=MATRIX_OF_32), prompt_matrix.PromptMatrixConfig()
    else:
        module, params, config, _ = job(name)
    pipe = capped["img2img" if isinstance(params, Img2ImgParams) else "txt2img"]
    calls = []
    handle = sd1_pipe.model.unet.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        with pytest.raises(ValueError, match="more than the 11 one script job may make"):
            module.run(pipe, params, config)
    finally:
        handle.remove()
    assert calls == []


def test_the_scripts_max_script_images_wins_over_the_pipelines_limits(capped):
    params, config = txt2img_params(prompt="a cat|red|blue|big"), prompt_matrix.PromptMatrixConfig()  # 8 images
    one = TextToImage.from_pipeline(capped["txt2img"], limits=GenerationLimits(max_script_images=1))
    with pytest.raises(ValueError, match="would generate 8 images"):
        prompt_matrix.run(one, params, config)
    result = prompt_matrix.run(one, params, config, max_script_images=8)
    assert len(result.images) == 1 + 8  # the grid, then every combination


@pytest.mark.parametrize("cap", [0, -5, True, 2.5, "100"])
def test_a_cap_that_is_not_a_whole_number_of_images_is_refused(cap):
    with pytest.raises(ValueError, match=rf"^max_script_images must be a whole number of images of at least 1, "
                                         rf"got {re.escape(repr(cap))}\.$"):
        script_image_cap({"max_script_images": cap})
    with pytest.raises(ValueError, match="^GenerationLimits.max_script_images must be a whole number"):
        GenerationLimits(max_script_images=cap)


def test_where_the_cap_comes_from(capped):
    assert script_image_cap({}) == script_image_cap({"max_script_images": None}) == DEFAULT_MAX_SCRIPT_IMAGES
    assert script_image_cap({}, capped["txt2img"]) == 11
    assert script_image_cap({"max_script_images": 40}, capped["txt2img"]) == 40
