"""kohya's --dataset_config TOML: settings resolved subset -> dataset -> [general] -> run -> kohya's default, kohya's
strict schema (unknown keys named with their place), and the datasets trained as kohya's DatasetGroup."""

from __future__ import annotations

from collections import Counter

import pytest

from mixkit.data import BucketSettings
from mixkit.data.caption_augmentation import CaptionAugmentation
from mixkit.training.dataset_config import read_dataset_config
from mixkit.training.dataset_config_scan import (dataset_group, datasets_metadata, scan_dataset_config,
                                                  without_held_out)
from mixkit.training.sd_lora_config import SDLoraTrainingConfig

from tests.mixkit.training.conftest import write_dataset_config, write_images, write_toml


def _run(dataset, **overrides) -> SDLoraTrainingConfig:
    return SDLoraTrainingConfig(**{"model": "m", "dataset": str(dataset), "output": "o.safetensors", **overrides})


def test_settings_resolve_subset_then_dataset_then_general_then_the_run(tmp_path):
    a, b, c = (write_images(tmp_path / name, ["x"]) for name in ("a", "b", "c"))
    path = write_toml(tmp_path / "ds.toml", f"""
[general]
shuffle_caption = true
caption_extension = ".caption"
keep_tokens = 1

[[datasets]]
resolution = 64
batch_size = 2
keep_tokens = 2

  [[datasets.subsets]]
  image_dir = '{a}'
  num_repeats = 10
  class_tokens = "sks dog"

  [[datasets.subsets]]
  image_dir = '{b}'
  is_reg = true
  keep_tokens = 3
  flip_aug = true
  caption_dropout_rate = 0.1

[[datasets]]
resolution = [96, 96]
enable_bucket = true
min_bucket_reso = 64
max_bucket_reso = 128
bucket_reso_steps = 32

  [[datasets.subsets]]
  image_dir = '{c}'
  caption_tag_dropout_rate = 0.25
""")
    run = _run(path, batch_size=4, caption_prefix="by run", caption_separator=";", bucket_step=64)
    first, second = read_dataset_config(path, run)

    assert (first.resolution, first.batch_size) == ((64, 64), 2)
    assert first.buckets == BucketSettings(False, step=64, min_side=256, max_side=1024, no_upscale=False)  # the run's
    sub_a, sub_b = first.subsets
    assert (sub_a.image_dir, sub_a.num_repeats, sub_a.is_reg, sub_a.class_tokens) == (a, 10, False, "sks dog")
    assert (sub_a.caption_extension, sub_a.flip_aug) == (".caption", False)
    assert sub_a.captions == CaptionAugmentation(shuffle=True, keep_tokens=2, separator=";", prefix="by run")
    assert (sub_b.image_dir, sub_b.num_repeats, sub_b.is_reg, sub_b.class_tokens) == (b, 1, True, None)
    assert sub_b.flip_aug is True
    assert sub_b.captions == CaptionAugmentation(shuffle=True, keep_tokens=3, dropout_rate=0.1, separator=";",
                                                 prefix="by run")

    assert (second.resolution, second.batch_size) == ((96, 96), 4)  # [96, 96] is square; batch size from the run
    assert second.buckets == BucketSettings(True, step=32, min_side=64, max_side=128, no_upscale=False)
    (sub_c,) = second.subsets
    assert (sub_c.num_repeats, sub_c.caption_extension) == (1, ".caption")
    assert sub_c.captions == CaptionAugmentation(shuffle=True, keep_tokens=1, tag_dropout_rate=0.25, separator=";",
                                                 prefix="by run")


@pytest.mark.parametrize("where, line, message", [
    ("subset", "num_repeat = 3", r"datasets\[0\]\.subsets\[0\]: unknown key 'num_repeat'; kohya's dataset config"),
    ("general", "image_dir = 'x'", r"\[general\]: unknown key 'image_dir'; it belongs in \[\[datasets.subsets\]\]"),
    ("general", "prior_loss_weight = 0.5", r"\[general\]: unknown key 'prior_loss_weight'.*--config file"),
    ("subset", "batch_size = 2",
     r"subsets\[0\]: unknown key 'batch_size'; it belongs in \[general\] or \[\[datasets\]\]"),
    ("subset", "metadata_file = 'meta.json'", r"subsets\[0\]: 'metadata_file' makes it a fine-tuning subset"),
    ("subset", "conditioning_data_dir = 'cond'", "'conditioning_data_dir' makes it a ControlNet subset"),
    ("subset", "color_aug = true", r"subsets\[0\]: color_aug = true: kohya's colour augmentation .*set color_aug = "
                                   "false or remove it"),
    ("dataset", "random_crop = true", r"datasets\[0\]: random_crop = true: mixkit crops images at the centre"),
    ("general", "face_crop_aug_range = [2.0, 4.0]", "face_crop_aug_range = .*face-centred.*remove face_crop_aug_range"),
    ("subset", "token_warmup_step = 10", "token_warmup_step = 10: kohya's token warm-up"),
    ("dataset", "network_multiplier = 0.5", "network_multiplier = 0.5: per-dataset network multipliers"),
    ("general", "resolution = [512, 766]", r"datasets\[0\]: resolution \[512, 766\]: each side must be positive and "
                                           "divisible by 8"),
    ("subset", "num_repeats = '3'", r"subsets\[0\]: num_repeats must be an integer, got '3'"),
    ("subset", "shuffle_caption = 1", "shuffle_caption must be true or false, got 1"),
    ("subset", "num_repeats = 0", "num_repeats = 0 must be at least 1"),
    ("subset", "caption_extension = 'txt'", r"subsets\[0\]: caption_extension must be a file extension"),
    ("subset", "caption_dropout_rate = 1.5", r"subsets\[0\]: caption_dropout_rate must be a probability"),
    ("dataset", "enable_bucket = true\nmin_bucket_reso = 128", r"datasets\[0\]: min_bucket_reso"),
    ("top", "[sample]\nx = 1", "unknown top-level key 'sample'"),
])
def test_kohyas_strict_schema_names_the_key_and_its_place(tmp_path, where, line, message):
    folder = write_images(tmp_path / "a", ["x"])
    general, dataset, subset, top = (line if where == w else "" for w in ("general", "dataset", "subset", "top"))
    path = write_toml(tmp_path / "ds.toml", f"[general]\n{general or 'resolution = 64'}\n[[datasets]]\n{dataset}\n"
                                       f"  [[datasets.subsets]]\n  image_dir = '{folder}'\n{subset}\n{top}\n")
    with pytest.raises(ValueError, match=message):
        read_dataset_config(path, _run(path))


def test_missing_and_misplaced_folders_are_named(tmp_path):
    path = write_toml(tmp_path / "ds.toml", "[[datasets]]\n  [[datasets.subsets]]\n  num_repeats = 2\n")
    with pytest.raises(ValueError, match=r"datasets\[0\]\.subsets\[0\]: image_dir is required"):
        read_dataset_config(path, _run(path))
    missing = tmp_path / "nope"
    path = write_toml(tmp_path / "ds.toml", f"[[datasets]]\n  [[datasets.subsets]]\n  image_dir = '{missing}'\n")
    with pytest.raises(ValueError, match=r"image_dir '.*nope' is not a folder .*working directory"):
        read_dataset_config(path, _run(path))
    with pytest.raises(ValueError, match="no \\[\\[datasets\\]\\]"):
        read_dataset_config(write_toml(tmp_path / "empty.toml", "[general]\nshuffle_caption = true\n"), _run(path))


def test_class_dataset_with_a_dataset_config_is_refused_before_anything_loads(tmp_path):
    path = write_toml(tmp_path / "ds.toml", "[[datasets]]\n")
    with pytest.raises(ValueError, match="as a subset with is_reg = true, and remove class_dataset"):
        _run(path, class_dataset="reg").check()


def test_other_trainers_refuse_a_dataset_config_naming_it(tmp_path):
    from mixkit.training.dataset_scan import scan_path

    with pytest.raises(ValueError, match="is a kohya dataset config, which only `sd-lora`"):
        scan_path(write_toml(tmp_path / "ds.toml", "[[datasets]]\n"), "folder_name")


def test_a_group_batches_each_dataset_on_its_own_and_counts_repeats_as_kohya(tmp_path):
    """kohya: an epoch is every batch of every dataset (ceil(samples / batch size) per bucket), a batch never mixes
    datasets, each image comes `num_repeats` times, and class images are balanced within their own dataset."""
    a = write_images(tmp_path / "a", ["r", "g", "b"])  # 3 images x 2
    b = write_images(tmp_path / "b", ["y", "p"])  # 2 images x 3
    reg = write_images(tmp_path / "reg", ["c1", "c2"])  # balanced to 12 class samples
    big = write_images(tmp_path / "big", ["m", "n", "o"], size=64)  # second dataset: 3 images x 1, 64 px
    path = write_dataset_config(tmp_path / "ds.toml", [
        {"resolution": 32, "batch_size": 5, "subsets": [{"image_dir": a, "num_repeats": 2},
                                                        {"image_dir": b, "num_repeats": 3},
                                                        {"image_dir": reg, "is_reg": True}]},
        {"resolution": 64, "batch_size": 2, "subsets": [{"image_dir": big}]}])
    config = _run(path, prior_loss_weight=0.5)
    _, members = scan_dataset_config(config)
    group = dataset_group(members, str(path), loss_masks=False)
    # dataset 0: 6 + 6 training samples and 12 class samples in one bucket -> ceil(24 / 5) = 5; dataset 1: ceil(3 / 2)
    assert group.batches_per_epoch(99) == 5 + 2
    batches = group.epoch_batches(0, 99, seed=7)
    assert sorted(len(batch) for batch in batches) == [1, 2, 4, 5, 5, 5, 5]
    counts = Counter(i for batch in batches for i in batch)
    repeats = {r.path.stem: n for r, n in ((group.records[i], n) for i, n in counts.items())}
    assert repeats == {"r": 2, "g": 2, "b": 2, "y": 3, "p": 3, "c1": 6, "c2": 6, "m": 1, "n": 1, "o": 1}
    for batch in batches:
        sizes = {group.records[i].width for i in batch}
        assert len(sizes) == 1  # never two datasets in one batch
        loaded = group.load_batch(batch)
        assert loaded["pixels"].shape[-1] == sizes.pop()  # each dataset at its own resolution
    weights = {group.records[i].path.stem: group.records[i].loss_weight for i in counts}
    assert weights["c1"] == 0.5 and weights["r"] == 1.0
    assert batches == group.epoch_batches(0, 99, seed=7) != group.epoch_batches(1, 99, seed=7)


def test_the_json_form_reads_as_the_toml_form(tmp_path):
    folder = write_images(tmp_path / "a", ["x"])
    datasets = [{"batch_size": 3, "subsets": [{"image_dir": folder, "num_repeats": 4}]}]
    toml = write_dataset_config(tmp_path / "ds.toml", datasets, general={"keep_tokens": 1})
    as_json = write_dataset_config(tmp_path / "ds.json", datasets, general={"keep_tokens": 1})
    assert read_dataset_config(as_json, _run(as_json)) == read_dataset_config(toml, _run(toml))
    as_json.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="must hold a JSON object.*\"general\" and \"datasets\""):
        read_dataset_config(as_json, _run(as_json))


def test_a_validation_split_holds_images_out_of_their_own_dataset(tmp_path):
    from mixkit.training.dataset_scan import scan_path
    from mixkit.training.validation_loss import held_out_records

    a = write_images(tmp_path / "a", ["r", "g", "b", "y"])
    big = write_images(tmp_path / "big", ["m", "n", "o", "p", "q", "s"], size=64)
    path = write_dataset_config(tmp_path / "ds.toml", [
        {"resolution": 32, "subsets": [{"image_dir": a, "num_repeats": 2}]},
        {"resolution": 64, "subsets": [{"image_dir": big}]}])
    config = _run(path, validation_split=0.2, seed=1)
    report, members = scan_dataset_config(config)
    kept, held = held_out_records(config, report.records, scan_path)
    assert len(held) == 2 and len(kept) == 8  # a fifth of the 10 images, chosen by the seed
    members = without_held_out(members, kept)
    group = dataset_group(members, str(path), loss_masks=False)
    assert not {r.path for r in held} & {r.path for r in group.records}
    counts = [d["num_train_images"] for d in datasets_metadata(members, group)]
    assert counts == [2 * sum(r.path.parent == a for r in kept), sum(r.path.parent == big for r in kept)]


def test_a_dataset_config_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    """A UTF-8 byte-order mark (Windows PowerShell 5, older Notepad) used to fail as TOML's "Invalid statement"."""
    folder = write_images(tmp_path / "a", ["x"])
    text = f"[[datasets]]\nresolution = 64\n  [[datasets.subsets]]\n  image_dir = '{folder}'\n  num_repeats = 3\n"
    path = tmp_path / "ds.toml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    (dataset,) = read_dataset_config(path, _run(path))
    assert (dataset.resolution, dataset.subsets[0].num_repeats) == ((64, 64), 3)


def test_a_dataset_of_width_by_height_and_one_of_the_runs_width_height(tmp_path):
    """kohya's dataset resolution [width, height] (or the run's "512,768" when the dataset gives none): its images are
    cropped to width x height, and ss_datasets records the pair as kohya's (dataset.width, dataset.height)."""
    a = write_images(tmp_path / "a", ["r", "g"], size=64)
    b = write_images(tmp_path / "b", ["y"], size=64)
    path = write_dataset_config(tmp_path / "ds.toml", [
        {"resolution": [48, 32], "subsets": [{"image_dir": a}]},
        {"subsets": [{"image_dir": b}]}])
    config = _run(path, resolution=[32, 40])
    first, second = read_dataset_config(path, config)
    assert (first.resolution, second.resolution) == ((48, 32), (32, 40))
    _, members = scan_dataset_config(config)
    group = dataset_group(members, str(path), loss_masks=False)
    shapes = {tuple(group.load_batch(batch)["pixels"].shape[-2:]) for batch in group.epoch_batches(0, 1, seed=0)}
    assert shapes == {(32, 48), (40, 32)}  # (height, width) of each dataset's pixels
    assert [d["resolution"] for d in datasets_metadata(members, group)] == [[48, 32], [32, 40]]
