"""Single-file (LDM/A1111 layout) checkpoints: write with our converter, load back with diffusers' one.

Two independent implementations meet here: `save_ldm_checkpoint` (ours, built by walking the
diffusers modules) writes the file, and `load_single_file` converts it back with diffusers'
`single_file_utils` converters. Exact parameter equality proves both agree on every key.
"""

from __future__ import annotations

import hashlib
import json
import pickle

import pytest
import torch

from mixkit.errors import CheckpointFormatError, ConfigMismatchError, ModelNotFoundError
from mixkit.models.diffusion.components import DiffusionModel
from mixkit.models.diffusion.family import ModelFamily
from mixkit.models.diffusion.single_file import load_single_file
from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

FAMILY_OF_FIXTURE = {"tiny_sd1_dir": ModelFamily.SD1, "tiny_sd2v_dir": ModelFamily.SD2, "tiny_sdxl_dir": ModelFamily.SDXL}


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


def diffusers_model(folder, family: ModelFamily) -> DiffusionModel:
    """The tiny model as diffusers loads it: the reference every single-file load must reproduce."""
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    if family is ModelFamily.SDXL:
        pipe = StableDiffusionXLPipeline.from_pretrained(folder)
        encoders, tokenizers = [pipe.text_encoder, pipe.text_encoder_2], [pipe.tokenizer, pipe.tokenizer_2]
    else:
        pipe = StableDiffusionPipeline.from_pretrained(folder, safety_checker=None, requires_safety_checker=False)
        encoders, tokenizers = [pipe.text_encoder], [pipe.tokenizer]
    return DiffusionModel(pipe.unet, pipe.vae, encoders, tokenizers, dict(pipe.scheduler.config), family,
                          name=folder.name, source=str(folder))


@pytest.fixture(scope="module")
def reference(request):
    cache = {}

    def get(fixture_name):
        if fixture_name not in cache:
            folder = request.getfixturevalue(fixture_name)
            cache[fixture_name] = (folder, diffusers_model(folder, FAMILY_OF_FIXTURE[fixture_name]))
        return cache[fixture_name]

    return get


def assert_same_parameters(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key].dtype == sb[key].dtype, key
        assert torch.equal(sa[key], sb[key]), key


def unet_output(model: DiffusionModel) -> torch.Tensor:
    torch.manual_seed(0)
    unet = model.unet
    latents = torch.randn(1, unet.config.in_channels, 8, 8)
    context = torch.randn(1, 7, unet.config.cross_attention_dim)
    kwargs = {}
    if model.family is ModelFamily.SDXL:
        pooled_dim = unet.config.projection_class_embeddings_input_dim - 6 * unet.config.addition_time_embed_dim
        kwargs["added_cond_kwargs"] = {"text_embeds": torch.randn(1, pooled_dim),
                                       "time_ids": torch.tensor([[64.0, 64, 0, 0, 64, 64]])}
    with torch.no_grad():
        return unet(latents, torch.tensor([500]), encoder_hidden_states=context, **kwargs).sample


# --- round trip: diffusers folder -> our LDM writer -> load_single_file -> identical model ----------

@pytest.mark.parametrize("fixture_name", list(FAMILY_OF_FIXTURE))
def test_round_trip_is_exact(fixture_name, reference, tmp_path):
    folder, original = reference(fixture_name)
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")

    loaded = load_single_file(file, config_dir=folder)

    assert loaded.family is original.family
    assert loaded.prediction_type == original.prediction_type
    assert_same_parameters(original.unet, loaded.unet)
    assert_same_parameters(original.vae, loaded.vae)
    assert len(loaded.text_encoders) == len(original.text_encoders)
    for a, b in zip(original.text_encoders, loaded.text_encoders):
        assert_same_parameters(a, b)
    # The weights are equal bit for bit (above). The same weights in other buffers can round the last bit
    # differently on some CPUs (seen on an AMD EPYC, 2026-11-24: 2e-7), so outputs get a last-bit tolerance.
    torch.testing.assert_close(unet_output(original), unet_output(loaded), atol=1e-6, rtol=1e-6)
    ids = torch.tensor([[512, 7, 8, 9, 513]])  # tiny byte-level tokenizer: bos 512, eos 513
    for a, b in zip(original.text_encoders, loaded.text_encoders):
        with torch.no_grad():
            torch.testing.assert_close(a(ids, output_hidden_states=True).hidden_states[-2],
                                       b(ids, output_hidden_states=True).hidden_states[-2], atol=1e-6, rtol=1e-6)
    assert loaded.name == "model" and loaded.source == str(file)
    assert loaded.model_hash == hashlib.sha256(file.read_bytes()).hexdigest()[:10]


def test_written_file_has_the_a1111_key_layout(reference, tmp_path):
    from safetensors import safe_open

    prefixes = {
        "tiny_sd1_dir": ["model.diffusion_model.", "first_stage_model.", "cond_stage_model.transformer.text_model."],
        "tiny_sd2v_dir": ["model.diffusion_model.", "first_stage_model.", "cond_stage_model.model."],
        "tiny_sdxl_dir": ["model.diffusion_model.", "first_stage_model.", "conditioner.embedders.0.transformer.text_model.",
                          "conditioner.embedders.1.model."],
    }
    for fixture_name, wanted in prefixes.items():
        _, model = reference(fixture_name)
        file = save_ldm_checkpoint(model, tmp_path / f"{fixture_name}.safetensors")
        with safe_open(str(file), "pt") as handle:
            keys = set(handle.keys())
        markers = {"v_pred"} if model.prediction_type == "v_prediction" else set()
        assert {k for k in keys if not any(k.startswith(p) for p in wanted)} == markers
        assert all(any(k.startswith(p) for k in keys) for p in wanted)
    # OpenCLIP stores q, k and v stacked: 3 x width rows (tiny encoders are 32 wide).
    with safe_open(str(tmp_path / "tiny_sd2v_dir.safetensors"), "pt") as handle:
        fused = handle.get_tensor("cond_stage_model.model.transformer.resblocks.0.attn.in_proj_weight")
        assert list(fused.shape) == [96, 32]
        assert list(handle.get_slice("first_stage_model.encoder.mid.attn_1.q.weight").get_shape()) == [16, 16, 1, 1]


def test_float16_export_and_load(reference, tmp_path):
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "half.safetensors", dtype=torch.float16)
    loaded = load_single_file(file, config_dir=folder, torch_dtype=torch.float16)
    assert loaded.unet.dtype == torch.float16
    for key, value in original.unet.state_dict().items():
        assert torch.equal(value.half(), loaded.unet.state_dict()[key]), key


def test_unet_in_its_own_dtype_the_rest_float32(reference, tmp_path):
    """The fast preset's load: a bfloat16 UNet straight from the file, text encoder and VAE float32."""
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "full.safetensors")
    loaded = load_single_file(file, config_dir=folder, unet_dtype=torch.bfloat16)
    assert loaded.unet.dtype == torch.bfloat16
    assert loaded.vae.dtype == loaded.text_encoders[0].dtype == torch.float32
    for key, value in original.unet.state_dict().items():
        assert torch.equal(value.bfloat16(), loaded.unet.state_dict()[key]), key
    with pytest.raises(TypeError, match="unet_dtype must be a floating torch.dtype"):
        load_single_file(file, config_dir=folder, unet_dtype="bf16")


# --- prediction type -------------------------------------------------------------------------

def test_v_prediction_marker_and_override(reference, tmp_path):
    folder, original = reference("tiny_sd2v_dir")
    file = save_ldm_checkpoint(original, tmp_path / "v.safetensors")
    assert load_single_file(file, config_dir=folder).prediction_type == "v_prediction"
    overridden = load_single_file(file, config_dir=folder, prediction_type="epsilon")
    assert overridden.prediction_type == "epsilon"
    assert overridden.extras["prediction_type_reason"] == "prediction_type= argument"


def test_guess_prediction_type_rules():
    from mixkit.models.diffusion.detect_keys import SD2_V_PROBE_KEY, guess_prediction_type

    assert guess_prediction_type({"v_pred": torch.tensor([])}, ModelFamily.SDXL)[0] == "v_prediction"
    assert guess_prediction_type({}, ModelFamily.SDXL)[0] == "epsilon"
    assert guess_prediction_type({}, ModelFamily.SD1)[0] == "epsilon"
    # Population std of [-a, a, -a, a] is exactly a: 0.2 is above ComfyUI's 0.09 threshold, 0.05 below.
    wide = torch.tensor([-0.2, 0.2, -0.2, 0.2])
    narrow = torch.tensor([-0.05, 0.05, -0.05, 0.05])
    assert guess_prediction_type({SD2_V_PROBE_KEY: wide}, ModelFamily.SD2)[0] == "v_prediction"
    assert guess_prediction_type({SD2_V_PROBE_KEY: narrow}, ModelFamily.SD2)[0] == "epsilon"
    assert guess_prediction_type({}, ModelFamily.SD2)[0] == "epsilon"
    # kohya's ModelSpec metadata declares it; the v_pred marker still wins.
    assert guess_prediction_type({}, ModelFamily.SDXL, {"modelspec.prediction_type": "v"})[0] == "v_prediction"
    assert guess_prediction_type({SD2_V_PROBE_KEY: wide}, ModelFamily.SD2, {"modelspec.prediction_type": "epsilon"})[0] == "epsilon"


# --- separate VAE file -----------------------------------------------------------------------

@pytest.mark.parametrize("prefix", ["", "first_stage_model.", "vae."])
def test_separate_vae_file_overrides_the_builtin_one(prefix, reference, tmp_path):
    from mixkit.io import save_safetensors
    from mixkit.models.diffusion.ldm_layout import vae_to_ldm
    from mixkit.testing.tiny_models import tiny_vae

    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    other_vae = tiny_vae(seed=123)
    vae_file = tmp_path / "other.vae.safetensors"
    save_safetensors(vae_to_ldm(other_vae, prefix), vae_file)

    loaded = load_single_file(file, config_dir=folder, vae_path=vae_file)

    assert_same_parameters(other_vae, loaded.vae)
    assert not torch.equal(other_vae.decoder.conv_out.weight, original.vae.decoder.conv_out.weight)
    assert_same_parameters(original.unet, loaded.unet)
    assert loaded.extras["vae_name"] == "other.vae.safetensors"  # A1111's get_loaded_vae_name(): the file's basename
    assert loaded.extras["vae_hash"] == hashlib.sha256(vae_file.read_bytes()).hexdigest()[:10]


def test_load_single_file_vae_alone(reference, tmp_path):
    from mixkit.io import save_safetensors
    from mixkit.models.diffusion.ldm_layout import vae_to_ldm
    from mixkit.models.diffusion.single_file import load_single_file_vae

    _, original = reference("tiny_sd1_dir")
    vae_file = tmp_path / "tiny_vae.safetensors"
    save_safetensors(vae_to_ldm(original.vae, "first_stage_model."), vae_file)
    vae = load_single_file_vae(vae_file, vae_config=dict(original.vae.config), torch_dtype=torch.float16)
    assert vae.dtype == torch.float16
    for key, value in original.vae.state_dict().items():
        assert torch.equal(value.half(), vae.state_dict()[key]), key
    with pytest.raises(CheckpointFormatError, match="tiny_vae.safetensors.*'VAE' configs.*other shapes"):
        load_single_file_vae(vae_file, family=ModelFamily.SDXL)  # full-size SDXL VAE config vs tiny file


def test_vae_file_without_decoder_is_refused(reference, tmp_path):
    from mixkit.io import save_safetensors

    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    bad = tmp_path / "bad_vae.safetensors"
    save_safetensors({"encoder.conv_in.weight": torch.zeros(8, 3, 3, 3)}, bad)
    with pytest.raises(CheckpointFormatError, match="bad_vae.safetensors.*no decoder"):
        load_single_file(file, config_dir=folder, vae_path=bad)


# --- bad input -------------------------------------------------------------------------------

def _resave(file, tmp_path, edit):
    from safetensors.torch import load_file

    from mixkit.io import save_safetensors

    state = load_file(str(file))
    edit(state)
    out = tmp_path / "edited.safetensors"
    save_safetensors(state, out)
    return out


def test_missing_keys_are_named(reference, tmp_path):
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    gone = "model.diffusion_model.out.2.bias"
    edited = _resave(file, tmp_path, lambda s: s.pop(gone))
    with pytest.raises(CheckpointFormatError, match=r"1 missing keys.*out\.2\.bias") as caught:
        load_single_file(edited, config_dir=folder)
    # a ConfigMismatchError, whose parts a caller knowing where the configs came from (a refiner) re-words
    error = caught.value
    assert isinstance(error, ConfigMismatchError)
    assert error.mismatch == (f"{edited} does not match the {str(folder)!r} configs: 1 missing keys (e.g. "
                              f"['{gone}'])")
    assert error.advice.startswith("If the file is complete, it has a different architecture: load it with the "
                                   "configs of a diffusers folder that matches it: load_diffusion_model(path, ")
    assert str(error) == f"{error.mismatch}. {error.advice}"
    copy = pickle.loads(pickle.dumps(error))  # as a worker process would hand it back
    assert type(copy) is ConfigMismatchError and str(copy) == str(error)


def test_file_without_vae_asks_for_vae_path(reference, tmp_path):
    from mixkit.io import save_safetensors
    from mixkit.models.diffusion.ldm_layout import vae_to_ldm

    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    no_vae = _resave(file, tmp_path, lambda s: [s.pop(k) for k in [k for k in s if k.startswith("first_stage_model.")]])
    with pytest.raises(CheckpointFormatError, match="no VAE.*vae_path="):
        load_single_file(no_vae, config_dir=folder)
    vae_file = tmp_path / "vae.safetensors"
    save_safetensors(vae_to_ldm(original.vae, ""), vae_file)
    assert_same_parameters(original.vae, load_single_file(no_vae, config_dir=folder, vae_path=vae_file).vae)


def test_unexpected_keys_are_named_but_known_extras_are_accepted(reference, tmp_path):
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")

    def add_known_extras(state):
        state["alphas_cumprod"] = torch.ones(1000)
        state["model_ema.decay"] = torch.tensor(0.999)
        state["cond_stage_model.transformer.text_model.embeddings.position_ids"] = torch.arange(77)[None]

    loaded = load_single_file(_resave(file, tmp_path, add_known_extras), config_dir=folder)
    assert_same_parameters(original.unet, loaded.unet)

    stray = "model.diffusion_model.input_blocks.1.0.extra_layer.weight"
    with pytest.raises(CheckpointFormatError, match=r"1 unexpected keys.*extra_layer"):
        load_single_file(_resave(file, tmp_path, lambda s: s.__setitem__(stray, torch.zeros(2))), config_dir=folder)


def test_legacy_sd1_text_encoder_keys_are_renamed(reference, tmp_path):
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    new, old = "cond_stage_model.transformer.text_model.", "cond_stage_model.transformer."

    def to_legacy(state):
        for key in [k for k in state if k.startswith(new)]:
            state[old + key[len(new):]] = state.pop(key)

    loaded = load_single_file(_resave(file, tmp_path, to_legacy), config_dir=folder)
    assert_same_parameters(original.text_encoders[0], loaded.text_encoders[0])


def test_sd2_file_may_hold_one_unused_final_text_layer(reference, tmp_path):
    folder, original = reference("tiny_sd2v_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    layers = original.text_encoders[0].config.num_hidden_layers
    prefix = "cond_stage_model.model.transformer.resblocks."

    def add_layer(index):
        def edit(state):
            for key in [k for k in state if k.startswith(f"{prefix}0.")]:
                state[key.replace(f"{prefix}0.", f"{prefix}{index}.")] = state[key].clone()
        return edit

    loaded = load_single_file(_resave(file, tmp_path, add_layer(layers)), config_dir=folder)
    assert_same_parameters(original.text_encoders[0], loaded.text_encoders[0])
    with pytest.raises(CheckpointFormatError, match=f"resblocks.{layers + 1}"):
        load_single_file(_resave(file, tmp_path, add_layer(layers + 1)), config_dir=folder)


def test_shape_mismatch_with_shipped_configs_says_what_to_do(reference, tmp_path):
    _, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointFormatError, match=r"'sd15' configs.*other shapes.*config_dir="):
        load_single_file(file)  # a tiny model against the full-size SD 1.5 configs


def test_the_config_dir_advice_works_as_written(reference, tmp_path):
    """The mismatch message names the ways to pass config_dir; from_pretrained forwards it to the loader."""
    from pipelines.txt2img import TextToImage

    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointFormatError) as info:
        TextToImage.from_pretrained(file)
    message = str(info.value)
    assert "TextToImage.from_pretrained(path, config_dir=FOLDER)" in message and "--config-dir FOLDER" in message
    pipe = TextToImage.from_pretrained(file, config_dir=folder)
    assert pipe.model.extras["configs"] == str(folder)
    assert_same_parameters(pipe.model.unet, original.unet)


def test_config_dir_of_another_family_is_refused(reference, tmp_path):
    _, original = reference("tiny_sd1_dir")
    sdxl_folder, _ = reference("tiny_sdxl_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="SD 1.x but config_dir .* describes SDXL base"):
        load_single_file(file, config_dir=sdxl_folder)


def test_lora_file_is_refused_with_a_hint(tmp_path):
    from mixkit.io import save_safetensors

    lora = tmp_path / "style_lora.safetensors"
    save_safetensors({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.zeros(4, 32),
                      "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.zeros(32, 4)}, lora)
    with pytest.raises(CheckpointFormatError, match=r"style_lora.safetensors.*input_blocks\.0\.0\.weight.*LoRA"):
        load_single_file(lora)


def test_truncated_file_is_refused(reference, tmp_path):
    _, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    with pytest.raises(CheckpointFormatError, match="truncated.safetensors"):
        load_single_file(truncated)


def test_input_validation(reference, tmp_path):
    folder, original = reference("tiny_sd1_dir")
    file = save_ldm_checkpoint(original, tmp_path / "model.safetensors")
    with pytest.raises(ModelNotFoundError, match="nope.safetensors"):
        load_single_file(tmp_path / "nope.safetensors")
    with pytest.raises(ModelNotFoundError, match="vae_path"):
        load_single_file(file, vae_path=tmp_path / "missing_vae.safetensors")
    with pytest.raises(ValueError, match="prediction_type must be one of"):
        load_single_file(file, prediction_type="sample")
    with pytest.raises(TypeError, match="torch_dtype"):
        load_single_file(file, torch_dtype="float16")
    with pytest.raises(ModelNotFoundError, match="not a diffusers model folder"):
        load_single_file(file, config_dir=tmp_path)
    with pytest.raises(ValueError, match=r"\.safetensors"):
        save_ldm_checkpoint(original, tmp_path / "model.ckpt")


# --- detection from keys ---------------------------------------------------------------------

def _shapes(*keys, in_channels=4):
    table = {key: (1,) for key in keys}
    table["model.diffusion_model.input_blocks.0.0.weight"] = (320, in_channels, 3, 3)
    return table


def test_detect_family_from_marker_keys():
    from mixkit.models.diffusion import detect_keys as d

    assert d.detect_family(_shapes(d.SD1_CLIP)) is ModelFamily.SD1
    assert d.detect_family(_shapes(d.SD2_OPEN_CLIP)) is ModelFamily.SD2
    assert d.detect_family(_shapes(d.SDXL_CLIP, d.SDXL_OPEN_CLIP, d.LABEL_EMB)) is ModelFamily.SDXL
    # inpainting files (9 channels) are detected like their family's text-to-image files, as in A1111
    assert d.detect_family(_shapes(d.SD1_CLIP, in_channels=9)) is ModelFamily.SD1
    assert d.detect_family(_shapes(d.SDXL_CLIP, d.SDXL_OPEN_CLIP, d.LABEL_EMB, in_channels=9)) is ModelFamily.SDXL
    # instruct-pix2pix files (8 channels) too: A1111 picks its instruct-pix2pix config for them
    assert d.detect_family(_shapes(d.SD1_CLIP, in_channels=8)) is ModelFamily.SD1
    with pytest.raises(CheckpointFormatError, match=r"takes 5 input channels .*"
                                                    r"only text-to-image \(4\), inpainting \(9\) and instruct-pix2pix \(8\)"):
        d.detect_family(_shapes(d.SD1_CLIP, in_channels=5))
    assert d.detect_family(_shapes(d.SDXL_REFINER_OPEN_CLIP, d.LABEL_EMB)) is ModelFamily.SDXL_REFINER
    with pytest.raises(CheckpointFormatError, match="Looked for: SD 1.x"):
        d.detect_family(_shapes("something.else"))
    # SDXL files that lack parts: named by what is missing and what to do (hunt: "an unCLIP model?" misled)
    with pytest.raises(CheckpointFormatError, match=r"one of SDXL's two text encoders .*conditioner.embedders.1.*"
                                                    r"download the full checkpoint"):
        d.detect_family(_shapes(d.SDXL_CLIP, d.LABEL_EMB))
    unet_only = {**_shapes(), d.LABEL_EMB: (1280, 2816)}
    with pytest.raises(CheckpointFormatError, match=r"holds an SDXL UNet only .*use the full SDXL checkpoint"):
        d.detect_family(unet_only)
    with pytest.raises(CheckpointFormatError, match=r"unCLIP or upscaler"):
        d.detect_family({**_shapes(), d.LABEL_EMB: (1280, 1024)})
    with pytest.raises(CheckpointFormatError, match="VAE-only"):
        d.detect_family({"encoder.conv_in.weight": (128, 3, 3, 3), "decoder.conv_out.weight": (3, 128, 3, 3)})


# --- shipped configs agree with the converters, at full size, without any weights --------------

# Published facts about the real files: key counts of v1-5-pruned-emaonly (1131 keys incl. CLIP's
# position_ids), v2-1_768-ema-pruned and sd_xl_base_1.0 (2515 incl. position_ids and logit_scale),
# and a few shapes any A1111 user can read from those files.
SHIPPED_FACTS = {
    ("sd15", ModelFamily.SD1, "epsilon"): (1130, {
        "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight": [320, 768],
        "model.diffusion_model.input_blocks.1.1.proj_in.weight": [320, 320, 1, 1],
        "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight": [49408, 768],
        "first_stage_model.encoder.mid.attn_1.q.weight": [512, 512, 1, 1],
    }),
    ("sd21-512", ModelFamily.SD2, "epsilon"): (1214, {
        "model.diffusion_model.input_blocks.1.1.proj_in.weight": [320, 320],
        "model.diffusion_model.middle_block.1.transformer_blocks.0.attn2.to_k.weight": [1280, 1024],
        "cond_stage_model.model.transformer.resblocks.22.attn.in_proj_weight": [3072, 1024],
        "cond_stage_model.model.positional_embedding": [77, 1024],
    }),
    ("sd21-768-v", ModelFamily.SD2, "v_prediction"): (1214, {
        "model.diffusion_model.output_blocks.11.1.transformer_blocks.0.norm1.bias": [320],
    }),
    ("sdxl-base", ModelFamily.SDXL, "epsilon"): (2513, {
        "model.diffusion_model.label_emb.0.0.weight": [1280, 2816],
        "model.diffusion_model.input_blocks.7.1.transformer_blocks.9.attn2.to_k.weight": [1280, 2048],
        "model.diffusion_model.output_blocks.2.2.conv.weight": [1280, 1280, 3, 3],
        "conditioner.embedders.1.model.text_projection": [1280, 1280],
        "conditioner.embedders.1.model.transformer.resblocks.31.attn.in_proj_weight": [3840, 1280],
    }),
}


@pytest.mark.parametrize("name,family,prediction", list(SHIPPED_FACTS), ids=[k[0] for k in SHIPPED_FACTS])
def test_shipped_configs_match_the_published_layout(name, family, prediction):
    from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint

    from mixkit.models.diffusion import single_file as sf
    from mixkit.models.diffusion.single_file_clip import to_module_keys
    from mixkit.models.diffusion.single_file_configs import shipped_configs
    from mixkit.models.diffusion.single_file_writer import UNET_PREFIX, VAE_PREFIX, ldm_state_dict

    configs = shipped_configs(family, prediction)
    assert configs.source == name and configs.family is family
    assert configs.scheduler["prediction_type"] == prediction
    unet, vae, encoders = sf._empty_modules(configs)  # meta tensors: shapes only, no memory
    ldm = ldm_state_dict(unet, vae, encoders, family)

    count, shapes = SHIPPED_FACTS[(name, family, prediction)]
    assert len(ldm) == count
    assert {k: list(ldm[k].shape) for k in shapes} == shapes

    # The extra keys real files carry (see the comment above SHIPPED_FACTS) pass the key check.
    real = dict(ldm)
    if family is ModelFamily.SD2:
        layers = configs.text_encoders[0]["num_hidden_layers"]
        real.update({k.replace(".resblocks.0.", f".resblocks.{layers}."): v for k, v in ldm.items() if ".resblocks.0." in k})
        real.update({"cond_stage_model.model.text_projection": None, "cond_stage_model.model.logit_scale": None})
    else:
        te1 = "cond_stage_model" if family is ModelFamily.SD1 else "conditioner.embedders.0"
        real[f"{te1}.transformer.text_model.embeddings.position_ids"] = torch.empty(1, 77, device="meta")
        if family is ModelFamily.SDXL:
            real["conditioner.embedders.1.model.logit_scale"] = torch.empty((), device="meta")
        assert len(real) == {ModelFamily.SD1: 1131, ModelFamily.SDXL: 2515}[family]
    real = {k: v if v is not None else torch.empty(1, device="meta") for k, v in real.items()}
    sf._check_layout(real, ldm, name, name, lambda key: sf._ignored(key, ldm))
    with pytest.raises(CheckpointFormatError, match="unexpected keys"):
        sf._check_layout({**real, "model.diffusion_model.stray": real[next(iter(real))]}, ldm, name, name,
                         lambda key: sf._ignored(key, ldm))

    converted = [convert_ldm_unet_checkpoint(sf._under(ldm, UNET_PREFIX), dict(unet.config)),
                 sf._convert_vae(sf._under(ldm, VAE_PREFIX), vae)]
    converted += [to_module_keys(c, e) for c, e in zip(sf._convert_text_encoders(ldm, encoders, family), encoders)]
    for module, state in zip([unet, vae, *encoders], converted):
        expected = {k: list(v.shape) for k, v in module.state_dict().items()}
        assert {k: list(v.shape) for k, v in state.items() if k in expected} == expected
        assert set(state) == set(expected)


# --- shipped tokenizer -----------------------------------------------------------------------

def test_shipped_clip_tokenizer_gives_the_standard_ids():
    from mixkit.models.diffusion.single_file_tokenizer import CLIP_VOCAB_SIZE, load_clip_tokenizer

    tokenizer = load_clip_tokenizer()
    assert len(tokenizer) == CLIP_VOCAB_SIZE == 49408
    assert tokenizer("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]
    assert tokenizer.pad_token_id == 49407
    open_clip_style = load_clip_tokenizer(pad_token="!")
    padded = open_clip_style("a photo of a cat", padding="max_length", max_length=9).input_ids
    assert padded == [49406, 320, 1125, 539, 320, 2368, 49407, 0, 0]
    with pytest.raises(ValueError, match="pad_token"):
        load_clip_tokenizer(pad_token="<pad>")


def test_clip_vocab_construction_order():
    from mixkit.models.diffusion.single_file_tokenizer import clip_vocab_from_merges

    vocab = clip_vocab_from_merges([("a", "b"), ("ab", "c</w>")])
    assert len(vocab) == 256 + 256 + 2 + 2
    assert vocab["!"] == 0 and vocab["!</w>"] == 256
    assert vocab["ab"] == 512 and vocab["abc</w>"] == 513
    assert vocab["<|startoftext|>"] == 514 and vocab["<|endoftext|>"] == 515


def test_shipped_tokenizer_settings_per_family():
    from mixkit.models.diffusion.single_file_configs import SHIPPED_CONFIGS

    pads = {}
    for folder in sorted(SHIPPED_CONFIGS.glob("*/tokenizer*/tokenizer_config.json")):
        pads[f"{folder.parent.parent.name}/{folder.parent.name}"] = json.loads(folder.read_text())["pad_token"]
    assert pads == {"sd15/tokenizer": "<|endoftext|>", "sd21-512/tokenizer": "!", "sd21-768-v/tokenizer": "!",
                    "sdxl-base/tokenizer": "<|endoftext|>", "sdxl-base/tokenizer_2": "!",
                    "sdxl-refiner/tokenizer_2": "!"}  # the refiner's is SDXL base's second one


def test_shipped_config_choice_follows_the_prediction_type(tmp_path):
    from mixkit.io import save_safetensors
    from mixkit.models.diffusion.single_file import _choose_configs

    plain = tmp_path / "plain.safetensors"
    save_safetensors({"x": torch.zeros(1)}, plain)
    declared = tmp_path / "declared.safetensors"
    save_safetensors({"x": torch.zeros(1)}, declared, metadata={"modelspec.prediction_type": "v"})

    configs, prediction, _ = _choose_configs({}, ModelFamily.SD2, None, None, plain)
    assert (configs.source, prediction, configs.scheduler["prediction_type"]) == ("sd21-512", "epsilon", "epsilon")
    configs, prediction, reason = _choose_configs({}, ModelFamily.SD2, None, None, declared)
    assert (configs.source, configs.scheduler["prediction_type"]) == ("sd21-768-v", "v_prediction")
    assert "modelspec.prediction_type" in reason
    configs, prediction, _ = _choose_configs({"v_pred": torch.tensor([])}, ModelFamily.SDXL, None, None, plain)
    assert (configs.source, configs.scheduler["prediction_type"]) == ("sdxl-base", "v_prediction")
    assert len(configs.text_encoders) == 2 and configs.tokenizers[1].pad_token == "!"
