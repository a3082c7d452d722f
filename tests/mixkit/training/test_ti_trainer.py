"""Textual-inversion training end to end on the tiny SD 1.x and SDXL models: only the new vectors change, the file is
kohya's (or A1111's) and generation uses it by its file name, templates make the captions, resume is exact, and bad
settings fail before any model loads."""

from __future__ import annotations

import pytest
import torch

from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.prompts.embeddings import EmbeddingLibrary, load_textual_inversion
from mixkit.prompts.encoder import PromptEncoder
from mixkit.training.ti_config import SDTextualInversionConfig
from mixkit.training.ti_templates import STYLE_TEMPLATES
from mixkit.training.ti_trainer import train_textual_inversion
from mixkit.training.ti_vectors import initial_vectors


def _config(model, dataset, output, **overrides) -> SDTextualInversionConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=4, learning_rate=5e-2, seed=3, mixed_precision="no", caption_prefix="zqx",
                    init_word="red", num_vectors_per_token=2)
    return SDTextualInversionConfig(**{**settings, **overrides})


def _weights(model) -> dict[str, torch.Tensor]:
    return {f"{part}.{name}": tensor.detach().clone()
            for part, module in [("unet", model.unet), ("vae", model.vae),
                                 *[(f"te{i}", e) for i, e in enumerate(model.text_encoders)]]
            for name, tensor in module.state_dict().items()}


def _assert_unchanged(model, before: dict[str, torch.Tensor], vocab_sizes: list[int]) -> None:
    after = _weights(model)
    assert after.keys() == before.keys()
    assert [name for name in before if not torch.equal(before[name], after[name])] == []
    assert [len(t) for t in model.tokenizers] == vocab_sizes  # no token added
    assert not any(p.requires_grad for e in model.text_encoders for p in e.parameters())


@pytest.fixture(scope="module")
def trained_sd1(tiny_sd1_dir, colour_dataset, tmp_path_factory):
    model = load_diffusion_model(tiny_sd1_dir)
    model.text_encoders[0].requires_grad_(False)
    before, sizes = _weights(model), [len(t) for t in model.tokenizers]
    output = tmp_path_factory.mktemp("ti-sd1") / "zqx.safetensors"
    config = _config(tiny_sd1_dir, colour_dataset, output, max_steps=8)
    return config, train_textual_inversion(config, model=model), model, before, sizes


def test_sd1_run_trains_only_the_new_vectors(trained_sd1):
    config, result, model, before, sizes = trained_sd1
    _assert_unchanged(model, before, sizes)
    from safetensors.torch import load_file

    tensors = load_file(result.output)
    start = initial_vectors(model.text_encoders, model.tokenizers, 2, "red")[0]
    assert list(tensors) == ["emb_params"] and tensors["emb_params"].shape == start.shape
    assert not torch.allclose(tensors["emb_params"], start)
    metadata = read_safetensors_metadata(result.output)
    assert metadata["modelspec.architecture"] == "stable-diffusion-v1/textual-inversion"
    assert metadata["modelspec.implementation"] == "https://github.com/Stability-AI/generative-models"
    assert result.steps == 8 and len(result.losses) == 8


def test_sd1_file_is_an_embedding_generation_uses_by_file_name(trained_sd1):
    config, result, model, _, _ = trained_sd1
    embedding = load_textual_inversion(result.output)
    assert embedding.name == "zqx" and embedding.num_vectors == 2
    library = EmbeddingLibrary(result.output.parent)
    assert library.names_for(model.text_encoders, False) == ["zqx"]
    with_file = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=False, embeddings=library)
    without = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=False)
    used = with_file.encode("a zqx square")
    assert used.embeddings_used == {"zqx": embedding.shorthash}
    assert not torch.allclose(used.hidden, without.encode("a zqx square").hidden)
    assert torch.equal(with_file.encode("a red square").hidden, without.encode("a red square").hidden)


def test_sd1_training_lowers_the_loss_of_its_captions(trained_sd1, colour_dataset, tmp_path):
    """The denoising loss of the training captions at fixed timesteps and noise, with the starting vectors and with
    the trained file in the prompt: the embedding has learned something about these images."""
    from diffusers import DDPMScheduler

    from mixkit.data import BucketedImageDataset, scan_kohya_folder
    from mixkit.training import diffusion_objective as objective

    config, result, model, _, _ = trained_sd1
    records = scan_kohya_folder(colour_dataset).records
    batch = BucketedImageDataset(records, 32).load_batch(list(range(len(records))))
    alphas = DDPMScheduler.from_config(model.scheduler_config).alphas_cumprod
    from mixkit.training.ti_export import save_embedding

    start_dir = tmp_path

    start = initial_vectors(model.text_encoders, model.tokenizers, 2, "red")[0]
    save_embedding({"emb_params": start}, start_dir / "zqx.safetensors", metadata={}, name="zqx", step=0,
                   checkpoint_name="tiny")

    def loss(folder) -> float:
        prompts = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=False,
                                embeddings=EmbeddingLibrary(folder))
        cond = torch.stack([prompts.encode(f"zqx {caption}").hidden for caption in batch["captions"]])
        generator = torch.Generator().manual_seed(123)
        with torch.no_grad():
            latents = model.vae.encode(batch["pixels"]).latent_dist.mean * model.vae.config.scaling_factor
            values = []
            for t in (100, 300, 500, 700, 900):
                timesteps = torch.full((latents.shape[0],), t)
                noise = torch.randn(latents.shape, generator=generator)
                noisy = objective.add_noise(latents, noise, timesteps, alphas)
                values.append(objective.weighted_mse(model.unet(noisy, timesteps, encoder_hidden_states=cond).sample,
                                                     noise, None).item())
        return sum(values) / len(values)

    assert loss(result.output.parent) < loss(start_dir)


def test_sdxl_run_with_object_templates_writes_clip_l_and_clip_g(tiny_sdxl_dir, colour_dataset, tmp_path):
    model = load_diffusion_model(tiny_sdxl_dir)
    for encoder in model.text_encoders:
        encoder.requires_grad_(False)
    before, sizes = _weights(model), [len(t) for t in model.tokenizers]
    config = _config(tiny_sdxl_dir, colour_dataset, tmp_path / "zqx.safetensors", caption_prefix="",
                     use_object_template=True, max_steps=3, resolution=64, batch_size=2)
    result = train_textual_inversion(config, model=model)
    _assert_unchanged(model, before, sizes)
    from safetensors.torch import load_file

    tensors = load_file(result.output)
    widths = [e.get_input_embeddings().embedding_dim for e in model.text_encoders]
    assert {k: tuple(v.shape) for k, v in tensors.items()} == {"clip_l": (2, widths[0]), "clip_g": (2, widths[1])}
    starts = initial_vectors(model.text_encoders, model.tokenizers, 2, "red")
    assert not torch.allclose(tensors["clip_l"], starts[0]) and not torch.allclose(tensors["clip_g"], starts[1])
    assert read_safetensors_metadata(result.output)["modelspec.architecture"] == \
        "stable-diffusion-xl-v1-base/textual-inversion"
    library = EmbeddingLibrary(tmp_path)
    assert library.names_for(model.text_encoders, True) == ["zqx"]
    with_file = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=True, embeddings=library)
    without = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=True)
    assert not torch.allclose(with_file.encode("a photo of zqx").hidden, without.encode("a photo of zqx").hidden)


def _captions_seen(monkeypatch) -> list[str]:
    import mixkit.training.denoising_loop as loop

    seen: list[str] = []
    original = loop.encode_sd

    def spy(text_encoders, tokenizers, captions, device, encoding=None):
        seen.extend(captions)
        return original(text_encoders, tokenizers, captions, device, encoding)

    monkeypatch.setattr(loop, "encode_sd", spy)
    return seen


def test_style_templates_replace_the_captions(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    seen = _captions_seen(monkeypatch)
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors", caption_prefix="",
                     use_style_template=True, max_steps=3)
    train_textual_inversion(config)
    allowed = {line.replace("[name]", "zqx") for line in STYLE_TEMPLATES}
    assert len(seen) == 9 and set(seen) <= allowed and len(set(seen)) > 1


def test_an_a1111_template_file_takes_name_and_filewords(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    seen = _captions_seen(monkeypatch)
    templates = tmp_path / "subject_filewords.txt"
    templates.write_text("a photo of a [name], [filewords]\n", encoding="utf-8")
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors", caption_prefix="",
                     template_file=str(templates), max_steps=1)
    train_textual_inversion(config)
    # One step of three images (the folder repeats each twice, so one may come twice).
    assert len(seen) == 3 and set(seen) <= {f"a photo of a zqx, a {colour} square, flat"
                                            for colour in ("blue", "green", "red")}


def test_resume_continues_bit_for_bit(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    straight = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a" / "zqx.safetensors",
                                               use_object_template=True, caption_prefix=""))
    first = _config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "zqx.safetensors", use_object_template=True,
                    caption_prefix="")
    stopped = train_textual_inversion(first, stop_at_step=2)
    assert stopped.output is None and stopped.last_checkpoint is not None
    resumed = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "zqx.safetensors",
                                              use_object_template=True, caption_prefix="",
                                              resume_from=str(stopped.last_checkpoint)))
    assert resumed.first_step == 2 and resumed.losses == straight.losses[2:]
    assert torch.equal(load_file(resumed.output)["emb_params"], load_file(straight.output)["emb_params"])


def test_a1111_pt_output_keeps_name_and_step(tiny_sd1_dir, colour_dataset, tmp_path):
    result = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.pt", max_steps=2))
    embedding = load_textual_inversion(result.output)
    assert (embedding.name, embedding.num_vectors, embedding.step) == ("zqx", 2, 2)
    assert embedding.sd_checkpoint_name == tiny_sd1_dir.name
    data = torch.load(result.output, weights_only=True)
    assert data["name"] == "zqx" and list(data["string_to_param"]) == ["*"]


@pytest.mark.parametrize("overrides, message", [
    (dict(use_object_template=True, use_style_template=True), "use_object_template and use_style_template"),
    (dict(output="zqx.ckpt"), "must end in .safetensors .* or .pt"),
    (dict(num_vectors_per_token=76), "num_vectors_per_token must be at most 75"),
    (dict(num_vectors_per_token=0), "num_vectors_per_token must be a positive"),
    (dict(weights="w.safetensors"), "init_word and weights both"),
    (dict(token_string=" zqx"), "token_string must be a word"),
    (dict(template_file="missing.txt"), "template_file 'missing.txt' cannot be read"),
    (dict(template_name="subjects.txt"), "Unknown prompt template 'subjects.txt'.*subject.txt"),
    (dict(template_name="style.txt", use_object_template=True), "use_object_template and template_name"),
])
def test_bad_settings_fail_before_the_model_loads(colour_dataset, tmp_path, overrides, message):
    settings = {"output": str(tmp_path / "zqx.safetensors"), **overrides}
    if settings["output"] == "zqx.ckpt":
        settings["output"] = str(tmp_path / "zqx.ckpt")
    config = _config(tmp_path / "no-model-here", colour_dataset, settings.pop("output"), **settings)
    with pytest.raises(ValueError, match=message):
        train_textual_inversion(config)


def test_sample_images_see_the_token_string_as_the_trained_vectors(tiny_sd1_dir, colour_dataset, tmp_path):
    """kohya's sample prompts write the token string; the images made during the run are what the written file gives
    (rendered again from it), not the plain word's."""
    import numpy as np
    from PIL import Image

    from mixkit.training.sample_prompts import parse_sample_prompt
    from mixkit.training.ti_vectors import TextualInversionVectors, vectors_from_file
    from mixkit.training.validation_images import render_validation_images

    prompt = "a zqx square --d 1 --s 3"
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors", max_steps=2,
                     validation_prompts=[prompt], validation_every=2)
    result = train_textual_inversion(config)
    [path] = sorted((tmp_path / "sample").glob("zqx_000002_00_*_1.png"))
    model = load_diffusion_model(tiny_sd1_dir)

    def render():
        [image] = render_validation_images(model, [parse_sample_prompt(prompt)], steps=20, seed=0, guidance_scale=7.0,
                                           height=32, width=32)
        return np.asarray(image)

    vectors = TextualInversionVectors(model.text_encoders, model.tokenizers, "zqx",
                                      vectors_from_file(result.output, model.text_encoders, False, 2)).attach()
    try:
        from_file = render()
    finally:
        vectors.detach()
    saved = np.asarray(Image.open(path))
    assert np.array_equal(saved, from_file) and not np.array_equal(saved, render())


def test_captions_without_the_token_string_are_named(tiny_sd1_dir, colour_dataset, tmp_path, caplog):
    from mixkit.data import scan_kohya_folder
    from mixkit.models.diffusion.loading import load_first_tokenizer
    from mixkit.training.ti_trainer import _check_captions_hold_token

    records = scan_kohya_folder(colour_dataset).records
    config = _config("m", colour_dataset, tmp_path / "red.safetensors", caption_prefix="")
    with caplog.at_level("WARNING"):
        _check_captions_hold_token(records, config, load_first_tokenizer(tiny_sd1_dir))  # only "a red square, flat"
    assert "2 of 3 captions lack token_string 'red'" in caplog.text


def _one_caption_dataset(root, caption: str):
    from PIL import Image

    folder = root / "1_thing"
    folder.mkdir(parents=True)
    Image.new("RGB", (32, 32), (200, 10, 10)).save(folder / "a.png")
    (folder / "a.txt").write_text(caption, encoding="utf-8")
    return root


def _refuse_model_loading(monkeypatch):
    import mixkit.models.diffusion.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the caption check")

    monkeypatch.setattr(loading, "load_diffusion_model", refuse)


def test_captions_without_the_token_string_fail_before_the_model_loads(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                         monkeypatch):
    _refuse_model_loading(monkeypatch)
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors", caption_prefix="")
    with pytest.raises(ValueError, match="token_string 'zqx' is in none of the 3 captions"):
        train_textual_inversion(config)


def test_token_string_inside_another_word_is_not_in_the_caption(tiny_sd1_dir, tmp_path, monkeypatch):
    """The match is on tokens, as training puts the vectors in: "cat" is no token run of "concatenate" (the byte
    tokenizer ends "cat" with t</w>), so the run is refused before the model loads instead of training nothing."""
    _refuse_model_loading(monkeypatch)
    dataset = _one_caption_dataset(tmp_path / "data", "concatenate shapes")
    config = _config(tiny_sd1_dir, dataset, tmp_path / "cat.safetensors", caption_prefix="")
    with pytest.raises(ValueError, match="token_string 'cat' is in none of the 1 captions"):
        train_textual_inversion(config)


def test_token_string_matches_captions_in_any_case(tiny_sd1_dir, tmp_path):
    """CLIP's tokenizer lower-cases, so "SksDog" (from the file name) is the "sksdog" the captions write: it trains."""
    from safetensors.torch import load_file

    dataset = _one_caption_dataset(tmp_path / "data", "a photo of sksdog")
    result = train_textual_inversion(_config(tiny_sd1_dir, dataset, tmp_path / "SksDog.safetensors",
                                             caption_prefix="", batch_size=1, max_steps=2))
    model = load_diffusion_model(tiny_sd1_dir)
    start = initial_vectors(model.text_encoders, model.tokenizers, 2, "red")[0]
    assert not torch.equal(load_file(result.output)["emb_params"], start)


def test_micro_batches_without_the_token_string_train_nothing(tiny_sd1_dir, colour_dataset, tmp_path):
    """Batch size 1 and every caption dropped: no micro-batch holds the token string. The run still completes every
    step (loss logged, optimizer and schedule stepped) and, with zero gradients, AdamW leaves the vectors where they
    started."""
    from safetensors.torch import load_file

    result = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors",
                                             batch_size=1, max_steps=3, caption_dropout_rate=1.0))
    assert result.steps == 3 and len(result.losses) == 3
    model = load_diffusion_model(tiny_sd1_dir)
    start = initial_vectors(model.text_encoders, model.tokenizers, 2, "red")[0]
    assert torch.equal(load_file(result.output)["emb_params"], start)


def test_resume_is_exact_when_some_micro_batches_lack_the_token_string(tiny_sd1_dir, colour_dataset, tmp_path):
    """Token 'blue' is in one of the three captions: at batch size 1 the first three steps (red, red, green) train
    nothing and caption dropout empties the fifth; a run stopped after step 3 and resumed ends where a straight run
    does, and the steps with 'blue' did train."""
    from safetensors.torch import load_file

    def config(folder, **overrides):
        return _config(tiny_sd1_dir, colour_dataset, tmp_path / folder / "blue.safetensors", caption_prefix="",
                       batch_size=1, max_steps=6, caption_dropout_rate=0.1, **overrides)

    straight = train_textual_inversion(config("a"))
    stopped = train_textual_inversion(config("b"), stop_at_step=3)
    resumed = train_textual_inversion(config("b", resume_from=str(stopped.last_checkpoint)))
    assert resumed.first_step == 3 and resumed.losses == straight.losses[3:]
    trained = load_file(straight.output)["emb_params"]
    assert torch.equal(load_file(resumed.output)["emb_params"], trained)
    model = load_diffusion_model(tiny_sd1_dir)
    assert not torch.equal(trained, initial_vectors(model.text_encoders, model.tokenizers, 2, "red")[0])


def test_a1111_named_template_takes_name_and_filewords(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    from mixkit.training.ti_templates import OBJECT_TEMPLATES

    seen = _captions_seen(monkeypatch)
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.safetensors", caption_prefix="",
                     template_name="subject_filewords.txt", max_steps=2)
    train_textual_inversion(config)
    allowed = {f"{line.replace('[name]', 'zqx')}, a {colour} square, flat" for line in OBJECT_TEMPLATES
               for colour in ("blue", "green", "red")}
    assert len(seen) == 6 and set(seen) <= allowed


def test_should_stop_ends_the_run_and_writes_the_steps_done(tiny_sd1_dir, colour_dataset, tmp_path):
    """A server's Interrupt: the run stops before the next step and writes what it has (A1111's Train tab), with the
    file's step counted from `step_offset`; the vectors are those of an uninterrupted run at that step."""
    steps_seen = []
    result = train_textual_inversion(
        _config(tiny_sd1_dir, colour_dataset, tmp_path / "a" / "zqx.pt", max_steps=6),
        should_stop=lambda: len(steps_seen) >= 2, on_step=lambda step, total, loss: steps_seen.append((step, total)),
        step_offset=10)
    assert result.interrupted and result.steps == 2 and steps_seen == [(1, 6), (2, 6)]
    stopped = torch.load(result.output, weights_only=True)
    assert stopped["step"] == 12
    straight = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "zqx.pt", max_steps=2))
    assert not straight.interrupted
    assert torch.equal(stopped["string_to_param"]["*"], torch.load(straight.output, weights_only=True)["string_to_param"]["*"])


def test_should_stop_before_the_first_step_writes_nothing(tiny_sd1_dir, colour_dataset, tmp_path):
    result = train_textual_inversion(_config(tiny_sd1_dir, colour_dataset, tmp_path / "zqx.pt"), should_stop=lambda: True)
    assert result.interrupted and result.output is None and result.steps == 0
    assert not (tmp_path / "zqx.pt").exists()
