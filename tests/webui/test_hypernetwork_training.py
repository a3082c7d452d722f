"""A1111's hypernetwork route fields as mixkit's configs (`webui.hypernetwork_training`): what each field becomes,
A1111's defaults and stepped learning rates, and refusals naming the field before anything is queued."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.hypernetwork_training import check_hn_train_fields, create_config, fresh_run_output, training_config

FIELDS = {"hypernetwork_name": "hn", "data_root": "squares", "steps": 5, "training_width": 64, "training_height": 64,
          "template_filename": "style.txt"}


def config_of(start_step: int = 0, **fields):
    return training_config(check_hn_train_fields({**FIELDS, **fields}), model="m", dataset=Path("d"),
                           output=Path("o/hn.pt"), hypernetwork="h/hn.pt", start_step=start_step)


def test_the_fields_become_the_trainers_settings():
    config = config_of(start_step=2, learn_rate="0.005", batch_size=3, gradient_step=2, clip_grad_mode="norm",
                       clip_grad_value="0.5", shuffle_tags=True, tag_drop_out=0.25, save_hypernetwork_every=4,
                       training_height=32)
    assert (config.hypernetwork, config.output, config.max_steps) == ("h/hn.pt", "o/hn.pt", 3)  # to step 5 from 2
    assert (config.learning_rate, config.learning_rate_schedule) == (0.005, None)
    assert (config.batch_size, config.gradient_accumulation_steps, config.max_grad_norm) == (3, 2, 0.5)
    assert (config.shuffle_caption, config.caption_tag_dropout_rate, config.save_every_n_steps) == (True, 0.25, 4)
    assert (config.resolution, config.template_name, config.validation_every) == ([64, 32], "style.txt", 0)


def test_a1111s_defaults_fill_what_a_request_leaves_out():
    config = config_of()
    assert (config.learning_rate, config.max_grad_norm, config.save_every_n_steps, config.batch_size) == \
        (1e-5, 0.0, 0, 1)  # A1111's hypernetwork rate "0.00001"


def test_a_stepped_learn_rate_is_the_trainers_schedule():
    config = config_of(learn_rate="5e-5:100, 5e-6:1500")
    assert config.learning_rate_schedule == "5e-5:100, 5e-6:1500"


@pytest.mark.parametrize("fields, error, says", [
    ({"embedding_name": "x"}, ValueError, "unknown field(s) embedding_name"),
    ({"save_embedding_every": 1}, ValueError, "unknown field(s) save_embedding_every"),
    ({"hypernetwork_name": None}, ValueError, "missing field(s) hypernetwork_name"),
    ({"save_hypernetwork_every": 1.5}, TypeError, "save_hypernetwork_every must be int"),
    ({"preview_sampler_index": 0}, ValueError, "preview_sampler_index is not supported"),
])
def test_fields_are_checked_naming_the_field(fields, error, says):
    with pytest.raises(error) as caught:
        check_hn_train_fields({**FIELDS, **fields})
    assert says in str(caught.value)


@pytest.mark.parametrize("start_step, fields, says", [
    (5, {}, "already trained to step 5; set steps above 5"),
    (0, {"learn_rate": "1e-3:x"}, "learn_rate '1e-3:x'"),
    (3, {"learn_rate": "1e-3:3", "steps": 10}, "learn_rate '1e-3:3' ends at step 3"),
    (0, {"latent_sampling_method": "deterministic"}, "latent_sampling_method='deterministic' is not supported"),
])
def test_values_the_run_cannot_take_are_refused_naming_the_field(start_step, fields, says):
    with pytest.raises(ValueError) as caught:
        config_of(start_step=start_step, **fields)
    assert says in str(caught.value)


def test_create_takes_a1111s_none_as_its_defaults(tmp_path):
    config = create_config(tmp_path, "hn", enable_sizes=["768", "320"], layer_structure=None, activation_func=None,
                           weight_init=None, dropout_structure=None)
    assert (config.output, config.context_widths(), config.layers()) == (str(tmp_path / "hn.pt"), [768, 320],
                                                                          [1.0, 2.0, 1.0])
    assert (config.activation_func, config.weight_init, config.overwrite) == ("linear", "Normal", False)


@pytest.mark.parametrize("name, says", [("a/b", "without folders"), ("", "name must name"), (3, "name must name")])
def test_create_refuses_a_name_that_is_no_file_stem(tmp_path, name, says):
    with pytest.raises(ValueError, match=says):
        create_config(tmp_path, name, enable_sizes=[768])


def test_a_second_run_of_the_day_gets_a_folder_of_its_own(tmp_path):
    assert fresh_run_output(tmp_path, "hn") == tmp_path / "hn.pt"
    (tmp_path / "hn.pt").touch()
    assert fresh_run_output(tmp_path, "hn") == tmp_path / "run-2" / "hn.pt"
    (tmp_path / "run-2").mkdir()
    (tmp_path / "run-2" / "hn.pt").touch()
    assert fresh_run_output(tmp_path, "hn") == tmp_path / "run-3" / "hn.pt"
