"""Sample prompts in kohya's syntax are honoured, not fed to the text encoder (hunt finding 4), and sample images
are named per run so runs sharing a folder keep theirs (finding 5).

kohya's `line_to_prompt_dict` (library/train_util.py): text before the first " --" is the prompt; --n negative
prompt, --w/--h size, --s steps, --l CFG scale, --d seed, --ss sampler. Its images go to
<output_dir>/sample/<output_name>_<step:06d>_<index:02d>_<YYYYmmddHHMMSS>[_<seed>].png.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from mixkit.training.sample_prompts import SamplePrompt, parse_sample_prompt, read_sample_prompts_file
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.validation_images import render_validation_images


def test_kohyas_options_are_cut_from_the_prompt():
    assert parse_sample_prompt("sks dog --n blurry, lowres --w 32 --h 48 --s 3 --l 2.5 --d 7 --ss ddim") == \
        SamplePrompt("sks dog", negative_prompt="blurry, lowres", width=32, height=48, steps=3, guidance_scale=2.5,
                     seed=7)
    assert parse_sample_prompt("a cat") == SamplePrompt("a cat")


@pytest.mark.parametrize("line, message", [
    ("a dog --x 3", "unknown option --x"),
    ("a dog --ss euler_a", "DDIM only"),
    ("a dog --w 30", "width 30 must be a positive multiple of 8.*try 24"),
    ("a dog --s 0", "steps must be in 1..1000"),
    ("a dog --l high", "--l needs a value like 7.5"),
])
def test_what_cannot_be_honoured_is_refused_naming_the_line(line, message):
    with pytest.raises(ValueError, match=message):
        parse_sample_prompt(line, source="validation_prompts")


def test_a_prompts_file_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_text("# my prompts\n\nsks dog --d 1\n  a cat --w 64\n", encoding="utf-8")
    assert read_sample_prompts_file(path) == [SamplePrompt("sks dog", seed=1), SamplePrompt("a cat", width=64)]
    (tmp_path / "bad.txt").write_text("ok\nsks --q 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt, line 2"):
        read_sample_prompts_file(tmp_path / "bad.txt")
    with pytest.raises(ValueError, match="only kohya's .txt form"):
        read_sample_prompts_file(tmp_path / "prompts.toml")


def test_each_prompts_options_set_its_image(tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model(str(tiny_sd1_dir))
    run = dict(steps=4, seed=0, guidance_scale=5.0, height=64, width=64)
    sized = render_validation_images(model, [SamplePrompt("a red square", width=32, height=48)], **run)[0]
    assert sized.size == (32, 48)
    seeded = render_validation_images(model, [SamplePrompt("a red square", seed=7, steps=2, guidance_scale=3.0)], **run)
    plain = render_validation_images(model, ["a red square"], **{**run, "seed": 7, "steps": 2, "guidance_scale": 3.0})
    assert np.array_equal(np.asarray(seeded[0]), np.asarray(plain[0]))
    negative = render_validation_images(model, [SamplePrompt("a red square", negative_prompt="blue", seed=7, steps=2,
                                                             guidance_scale=3.0)], **run)
    assert not np.array_equal(np.asarray(negative[0]), np.asarray(plain[0]))


def test_runs_sharing_a_folder_keep_their_own_sample_images(tiny_sd1_dir, colour_dataset, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a blue square --w 32 --h 48 --d 7\n", encoding="utf-8")
    for name in ("lr1e-2", "lr1e-3"):
        train_sd_lora(SDLoraTrainingConfig(
            model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / "out" / f"{name}.safetensors"),
            resolution=32, batch_size=3, max_steps=1, validation_every=1, validation_steps=2,
            validation_prompts=["a red square --n green"], sample_prompts=str(prompts)))
    names = sorted(p.name for p in (tmp_path / "out" / "sample").iterdir())
    stamp = r"\d{14}"
    patterns = [rf"lr1e-2_000001_00_{stamp}\.png", rf"lr1e-2_000001_01_{stamp}_7\.png",
                rf"lr1e-3_000001_00_{stamp}\.png", rf"lr1e-3_000001_01_{stamp}_7\.png"]
    assert len(names) == 4 and all(re.fullmatch(p, n) for p, n in zip(patterns, names)), names
    from PIL import Image

    assert Image.open(tmp_path / "out" / "sample" / names[1]).size == (32, 48)


def test_validation_every_is_satisfied_by_a_prompts_file(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("a dog\n", encoding="utf-8")
    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"), validation_every=5)
    SDLoraTrainingConfig(**base, sample_prompts=str(prompts)).check()
    with pytest.raises(ValueError, match="validation_prompts: sample prompt 'a dog --w 12'"):
        SDLoraTrainingConfig(**base, validation_prompts=["a dog --w 12"]).check()
    with pytest.raises(FileNotFoundError, match="sample_prompts .* is not a file"):
        SDLoraTrainingConfig(**base, sample_prompts=str(tmp_path / "missing.txt")).check()
