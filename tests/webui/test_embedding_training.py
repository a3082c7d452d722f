"""A1111's train_embedding fields as trainer settings (`webui.embedding_training`): values that cannot work are
refused before the run is queued, naming the field, never after the training steps ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.params import SEED_MAX, GenerationLimits
from webui.embedding_training import check_train_fields, check_training_limits, learning_rate, training_config

FIELDS = {"embedding_name": "pp", "data_root": "squares", "steps": 5, "training_width": 64, "training_height": 64,
          "template_filename": "subject.txt"}
PREVIEW = {"create_image_every": 1, "preview_from_txt2img": True, "preview_width": 64, "preview_height": 64,
           "preview_steps": 2}


def config_of(**fields):
    return training_config(check_train_fields({**FIELDS, **fields}), model="m", dataset=Path("d"),
                           output=Path("o/pp.pt"), num_vectors=1, weights="pp.pt", start_step=0)


@pytest.mark.parametrize("text", ["...", "1.2.3", "--1", "e"])
def test_a_learn_rate_that_is_no_number_is_refused_naming_the_field(text):
    with pytest.raises(ValueError, match=rf"^learn_rate {text!r} is not a number; send one rate such as '0.005'"):
        learning_rate(text)


def test_learn_rate_text_and_numbers_are_read_as_one_rate():
    assert (learning_rate(" 5e-3 "), learning_rate("0.05"), learning_rate(2)) == (0.005, 0.05, 2.0)


@pytest.mark.parametrize("text", ["1.2.3", "."])
def test_a_clip_grad_value_that_is_no_number_is_refused_naming_the_field(text):
    with pytest.raises(ValueError, match=rf"^clip_grad_value={text!r} is not supported: send one number"):
        config_of(clip_grad_mode="norm", clip_grad_value=text)


def test_clip_grad_value_text_is_the_max_norm():
    assert config_of(clip_grad_mode="norm", clip_grad_value="0.25").max_grad_norm == 0.25


@pytest.mark.parametrize("seed", [SEED_MAX + 1, 2**70, -2])
def test_a_preview_seed_no_generator_takes_is_refused_before_the_run(seed):
    fields = check_train_fields({**FIELDS, **PREVIEW, "preview_seed": seed})
    with pytest.raises(ValueError, match=rf"^preview_seed must be -1 \(random\) or in \[0, {SEED_MAX}\], got {seed}"):
        check_training_limits(fields, GenerationLimits())


def test_the_largest_preview_seed_is_taken():
    check_training_limits(check_train_fields({**FIELDS, **PREVIEW, "preview_seed": SEED_MAX}), GenerationLimits())
    assert config_of(**PREVIEW, preview_seed=SEED_MAX).validation_prompts[0].endswith(f"--d {SEED_MAX}")


def test_training_width_and_height_become_the_trainers_resolution():
    assert config_of().resolution == 64  # a square: one side
    assert config_of(training_width=64, training_height=96).resolution == [64, 96]  # kohya's [width, height]


def test_a_non_square_training_size_is_held_to_the_servers_limits():
    limits = GenerationLimits(max_pixels=64 * 64)
    check_training_limits(check_train_fields({**FIELDS, "training_width": 32, "training_height": 128}), limits)
    with pytest.raises(ValueError, match="over the budget"):
        check_training_limits(check_train_fields({**FIELDS, "training_width": 64, "training_height": 128}), limits)
