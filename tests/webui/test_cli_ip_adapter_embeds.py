"""`mixkit ip-adapter-embeds` writes an adapter's image-prompt embeddings; `--ip-adapter-embeds` uses them instead of
the image, giving the same picture without the image encoder."""

import shutil

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors import safe_open

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21"]


@pytest.fixture(scope="module")
def adapter(tiny_sd1_dir, tmp_path_factory):
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    return save_tiny_ip_adapter(tmp_path_factory.mktemp("ip") / "models", unet)


def write_embeds(tiny_sd1_dir, adapter, out, *images) -> int:
    flags = [arg for image in images for arg in ("--ip-adapter-image", str(image))]
    return main(["ip-adapter-embeds", "--model", str(tiny_sd1_dir), "--ip-adapter", str(adapter), *flags,
                 "-o", str(out)])


def generate(tiny_sd1_dir, out, *extra) -> int:
    return main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])


def png(folder) -> Image.Image:
    return Image.open(next(folder.glob("*.png")))


def test_written_file_holds_what_the_python_api_encodes(tiny_sd1_dir, adapter, tmp_path):
    from pipelines.ip_adapter import IPAdapterTextToImage

    first = write_noise_picture(tmp_path / "a.png", 0, 40, 40)
    second = write_noise_picture(tmp_path / "b.png", 1, 48, 40)
    out = tmp_path / "ref.safetensors"
    assert write_embeds(tiny_sd1_dir, adapter, out, first, second) == 0
    with safe_open(str(out), framework="pt") as opened:
        stored, metadata = opened.get_tensor("ip_adapter_image_embeds"), opened.metadata()
    pipe = IPAdapterTextToImage.from_pretrained(str(tiny_sd1_dir))
    (expected,) = pipe.encode_ip_adapter_image([Image.open(first), Image.open(second)], ip_adapter=str(adapter))
    assert stored.shape[:2] == (2, 2) and torch.equal(stored, expected)
    assert metadata["ip_adapter"] == "ip-adapter_tiny" and metadata["images"] == "2"


def test_embeds_give_the_image_prompts_picture_without_the_encoder(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    embeds = tmp_path / "ref.safetensors"
    assert write_embeds(tiny_sd1_dir, adapter, embeds, image) == 0
    bare = tmp_path / "bare" / adapter.name  # the weights alone: no image_encoder/ beside them
    bare.parent.mkdir()
    shutil.copy(adapter, bare)
    assert generate(tiny_sd1_dir, tmp_path / "image", "--ip-adapter", str(adapter), "--ip-adapter-image",
                    str(image), "--ip-adapter-scale", "0.7") == 0
    capsys.readouterr()
    assert generate(tiny_sd1_dir, tmp_path / "embeds", "--ip-adapter", str(bare), "--ip-adapter-embeds", str(embeds),
                    "--ip-adapter-scale", "0.7") == 0
    assert "note" not in capsys.readouterr().err  # same adapter name: no mismatch note
    assert png(tmp_path / "embeds").tobytes() == png(tmp_path / "image").tobytes()
    assert 'IP-Adapter: "ip-adapter_tiny: 0.7"' in png(tmp_path / "embeds").text["parameters"]


def test_masks_follow_the_embeddings_images(tiny_sd1_dir, adapter, tmp_path):
    first = write_noise_picture(tmp_path / "a.png", 0, 40, 40)
    second = write_noise_picture(tmp_path / "b.png", 1, 40, 40)
    embeds = tmp_path / "two.safetensors"
    assert write_embeds(tiny_sd1_dir, adapter, embeds, first, second) == 0
    left = Image.new("L", (64, 64), 0)
    left.paste(255, (0, 0, 32, 64))
    left.save(tmp_path / "left.png")
    Image.eval(left, lambda v: 255 - v).save(tmp_path / "right.png")
    masks = ["--ip-adapter-mask", str(tmp_path / "left.png"), "--ip-adapter-mask", str(tmp_path / "right.png")]
    assert generate(tiny_sd1_dir, tmp_path / "images", "--ip-adapter", str(adapter), "--ip-adapter-image", str(first),
                    "--ip-adapter-image", str(second), *masks) == 0
    assert generate(tiny_sd1_dir, tmp_path / "embeds", "--ip-adapter", str(adapter), "--ip-adapter-embeds",
                    str(embeds), *masks) == 0
    assert png(tmp_path / "embeds").tobytes() == png(tmp_path / "images").tobytes()
    assert generate(tiny_sd1_dir, tmp_path / "one", "--ip-adapter", str(adapter), "--ip-adapter-embeds",
                    str(embeds), *masks[:2]) == 2  # two images in the file, one mask


def test_embeds_of_other_weights_are_noted(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    embeds = tmp_path / "ref.safetensors"
    assert write_embeds(tiny_sd1_dir, adapter, embeds, image) == 0
    renamed = tmp_path / "other" / "ip-adapter_renamed.safetensors"
    renamed.parent.mkdir()
    shutil.copy(adapter, renamed)
    capsys.readouterr()
    assert generate(tiny_sd1_dir, tmp_path / "out", "--ip-adapter", str(renamed), "--ip-adapter-embeds",
                    str(embeds)) == 0
    assert "was made by IP-Adapter 'ip-adapter_tiny', not 'ip-adapter_renamed'" in capsys.readouterr().err


def test_embeddings_of_the_wrong_shape_are_refused_by_the_python_api_check(tiny_sd1_dir, adapter, tmp_path, capsys):
    from safetensors.torch import save_file

    bad = tmp_path / "bad.safetensors"
    save_file({"ip_adapter_image_embeds": torch.zeros(1, 2, 8)}, str(bad))
    code = generate(tiny_sd1_dir, tmp_path / "out", "--ip-adapter", str(adapter), "--ip-adapter-embeds", str(bad))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "--ip-adapter-embeds[0] has shape (1, 2, 8)" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)
    other = tmp_path / "other.safetensors"
    save_file({"something": torch.zeros(2, 1, 8)}, str(other))
    assert generate(tiny_sd1_dir, tmp_path / "out", "--ip-adapter", str(adapter), "--ip-adapter-embeds",
                    str(other)) == 2
    assert "holds no 'ip_adapter_image_embeds' tensor" in capsys.readouterr().err


@pytest.mark.parametrize("output, extra, message", [
    ("ref.png", [], "must end in .safetensors"),
    ("missing/ref.safetensors", [], "does not exist; create it first"),
    ("ref.safetensors", ["--ip-adapter-image", "{missing}"], "does not exist"),
])
def test_bad_arguments_fail_before_the_load_and_write_nothing(tiny_sd1_dir, adapter, tmp_path, capsys, output, extra,
                                                              message):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    images = [value.format(missing=tmp_path / "nope.png") for value in extra] or ["--ip-adapter-image", str(image)]
    code = main(["ip-adapter-embeds", "--model", str(tiny_sd1_dir), "--ip-adapter", str(adapter), *images,
                 "-o", str(tmp_path / output)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)
    assert not list(tmp_path.glob("**/*.safetensors"))


def test_the_written_embeddings_change_with_the_picture(tiny_sd1_dir, adapter, tmp_path):
    out = []
    for seed in (0, 1):
        image = write_noise_picture(tmp_path / f"{seed}.png", seed, 40, 40)
        assert write_embeds(tiny_sd1_dir, adapter, tmp_path / f"{seed}.safetensors", image) == 0
        with safe_open(str(tmp_path / f"{seed}.safetensors"), framework="pt") as opened:
            out.append(opened.get_tensor("ip_adapter_image_embeds").numpy())
    assert not np.array_equal(out[0][1], out[1][1])
