"""A1111's `model-resnet_custom_v3.pt` (tensors + `tags`) read through mixkit's weights-only reader: widths from the
file, the state fitted key for key, and every broken file refused naming what is wrong."""

from __future__ import annotations

import pytest
import torch

from mixkit.errors import CheckpointFormatError
from mixkit.interrogate.deepbooru import (A1111_FILE_NAME, A1111_URL, DeepbooruModel, find_deepbooru_file,
                                          load_deepbooru)
from mixkit.testing.tiny_deepbooru import (crafted_deepbooru_state, random_deepbooru_state, save_deepbooru,
                                           tiny_deepbooru_sizes)

TAGS = ["1girl", "solo", "rating:safe"]


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    return save_deepbooru(tmp_path_factory.mktemp("deepbooru") / A1111_FILE_NAME, random_deepbooru_state(3), TAGS)


def test_a_saved_file_loads_back_with_its_widths_weights_and_tags(tiny_file):
    network, tags = load_deepbooru(tiny_file)
    assert tags == TAGS
    assert network.sizes == tiny_deepbooru_sizes(3)
    assert not network.training
    saved = random_deepbooru_state(3)
    assert list(network.state_dict()) == list(saved)
    assert all(torch.equal(network.state_dict()[key], value) for key, value in saved.items())


def test_scores_of_a_crafted_file_are_exact(tmp_path):
    path = save_deepbooru(tmp_path / "crafted.pt", crafted_deepbooru_state([3.0, -2.0]), ["a", "b"])
    tags, scores = DeepbooruModel(tmp_path).probabilities(torch.zeros(1, 3, 512, 512))
    assert path.name == "crafted.pt" and tags == ["a", "b"]
    assert scores == torch.sigmoid(torch.tensor([3.0, -2.0])).tolist()


def test_the_model_is_dropped_after_use_unless_kept(tiny_file):
    model = DeepbooruModel(tiny_file.parent)
    model.probabilities(torch.zeros(1, 3, 512, 512))
    assert model._loaded is None
    model.probabilities(torch.zeros(1, 3, 512, 512), keep_in_memory=True)
    assert model._loaded is not None and model._loaded[1] == TAGS
    model.unload()
    assert model._loaded is None


def _saved(tmp_path, state, tags=TAGS, **extra):
    path = tmp_path / "broken.pt"
    torch.save({**state, **({} if tags is None else {"tags": tags}), **extra}, path)
    return path


def test_a_file_without_its_tag_list_is_refused(tmp_path):
    with pytest.raises(CheckpointFormatError, match="holds no DeepDanbooru tag list .*'tags'"):
        load_deepbooru(_saved(tmp_path, random_deepbooru_state(3), tags=None))
    with pytest.raises(CheckpointFormatError, match="names 2 tags but its last layer scores 3"):
        load_deepbooru(_saved(tmp_path, random_deepbooru_state(3), tags=["a", "b"]))


def test_weights_that_do_not_fill_the_network_are_named(tmp_path):
    state = random_deepbooru_state(3)
    state["n_Conv_50.weight"] = torch.zeros(2, 8, 3, 3)
    with pytest.raises(CheckpointFormatError, match=r"n_Conv_50.weight \(2, 8, 3, 3\) \(expected \(2, 2, 3, 3\)\)"):
        load_deepbooru(_saved(tmp_path, state))
    state = random_deepbooru_state(3)
    del state["n_Conv_60.bias"]
    with pytest.raises(CheckpointFormatError, match="missing \\['n_Conv_60.bias'\\]"):
        load_deepbooru(_saved(tmp_path, state))


def test_a_file_of_another_network_is_refused_naming_the_download(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"conv.weight": torch.zeros(1, 1, 1, 1)}, path)
    with pytest.raises(CheckpointFormatError, match=f"n_Conv_0.weight is missing.*{A1111_URL}"):
        load_deepbooru(path)
    torch.save([torch.zeros(1)], path)
    with pytest.raises(CheckpointFormatError, match="holds a list, not DeepDanbooru weights"):
        load_deepbooru(path)


def test_nan_weights_are_refused(tmp_path):
    state = random_deepbooru_state(3)
    state["n_Conv_7.weight"][0, 0, 0, 0] = float("nan")
    with pytest.raises(CheckpointFormatError, match="'n_Conv_7.weight' contains NaN"):
        load_deepbooru(_saved(tmp_path, state))


def test_the_folder_lookup_prefers_a1111s_file_name_and_says_what_to_download(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'absent'}.*does not exist.*{A1111_FILE_NAME}"):
        find_deepbooru_file(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match=f"No DeepDanbooru model in .*{A1111_FILE_NAME} from {A1111_URL}"):
        find_deepbooru_file(tmp_path)
    (tmp_path / "b.pt").write_bytes(b"")
    (tmp_path / "a.pt").write_bytes(b"")
    assert find_deepbooru_file(tmp_path).name == "a.pt"
    (tmp_path / A1111_FILE_NAME).write_bytes(b"")
    assert find_deepbooru_file(tmp_path).name == A1111_FILE_NAME


def test_a_half_precision_file_runs_in_float32(tmp_path):
    state = {key: value.half() for key, value in crafted_deepbooru_state([1.5, -0.5]).items()}
    network, _ = load_deepbooru(save_deepbooru(tmp_path / "half.pt", state, ["a", "b"]))
    assert {parameter.dtype for parameter in network.parameters()} == {torch.float32}
    with torch.no_grad():
        scores = network(torch.zeros(1, 3, 512, 512))[0]
    assert torch.equal(scores, torch.sigmoid(torch.tensor([1.5, -0.5])))  # both logits exact in fp16


@pytest.fixture
def counted_loads(monkeypatch):
    """The files `DeepbooruModel` reads, in order (the real reader runs)."""
    from mixkit.interrogate import deepbooru

    loads, real = [], deepbooru.load_deepbooru

    def load(path, **kwargs):
        loads.append(path)
        return real(path, **kwargs)
    monkeypatch.setattr(deepbooru, "load_deepbooru", load)
    return loads


def test_a_held_tagger_loads_once_for_the_whole_block_then_is_dropped(tiny_file, counted_loads):
    model = DeepbooruModel(tiny_file.parent)
    pixels = torch.zeros(1, 3, 512, 512)
    with model.held():
        scores = [model.probabilities(pixels)[1] for _ in range(3)]
        assert model._loaded is not None
    assert counted_loads == [tiny_file] and model._loaded is None
    assert scores[0] == scores[1] == scores[2]
    model.probabilities(pixels)
    model.probabilities(pixels)
    assert len(counted_loads) == 3  # not held, keep off: each use reads the file


def test_a_held_tagger_whose_last_use_keeps_it_stays_loaded(tiny_file, counted_loads):
    model = DeepbooruModel(tiny_file.parent)
    with model.held():
        model.probabilities(torch.zeros(1, 3, 512, 512), keep_in_memory=True)
    assert model._loaded is not None and counted_loads == [tiny_file]


def test_the_shared_tagger_is_one_per_folder_and_device(tiny_file, tmp_path, counted_loads):
    from mixkit.interrogate import shared_deepbooru_model

    folder = tiny_file.parent
    model = shared_deepbooru_model(folder)
    assert shared_deepbooru_model(folder / ".." / folder.name, device="cpu") is model  # another spelling
    assert shared_deepbooru_model(tmp_path) is not model
    try:
        for _ in range(2):
            model.probabilities(torch.zeros(1, 3, 512, 512), keep_in_memory=True)
        shared_deepbooru_model(folder).probabilities(torch.zeros(1, 3, 512, 512), keep_in_memory=True)
        assert [path.resolve() for path in counted_loads] == [tiny_file.resolve()]
    finally:
        model.unload()


def test_load_reads_the_file_once_now_and_a_kept_use_reuses_it(tiny_file, counted_loads):
    model = DeepbooruModel(tiny_file.parent)
    model.load()
    assert counted_loads == [tiny_file] and model._loaded[1] == TAGS
    model.load()
    model.probabilities(torch.zeros(1, 3, 512, 512), keep_in_memory=True)
    assert counted_loads == [tiny_file]  # loaded once: the uses found it loaded
    model.unload()
    assert model._loaded is None


def test_load_refuses_a_file_that_is_not_a_tagger_before_any_picture(tmp_path):
    (tmp_path / A1111_FILE_NAME).write_bytes(b"<html>not found</html>")
    model = DeepbooruModel(tmp_path)
    with pytest.raises(CheckpointFormatError, match=f"{A1111_FILE_NAME}' is not a recognised checkpoint"):
        model.load()
    assert model._loaded is None
