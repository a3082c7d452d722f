import pytest


@pytest.fixture(scope="session")
def sd1_pipe(tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="session")
def sdxl_pipe(tiny_sdxl_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


@pytest.fixture(scope="module")
def inpaint_pipe(tmp_path_factory):
    """img2img on a tiny 9-channel inpainting checkpoint, saved and loaded back through the public path."""
    from mixkit.testing.tiny_controlnet import build_tiny_sd1_inpaint
    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(build_tiny_sd1_inpaint(tmp_path_factory.mktemp("tiny-inpaint"), seed=0))
    assert pipe.model.unet.config.in_channels == 9
    return pipe


SMALL = dict(width=64, height=64, steps=4)


@pytest.fixture
def registered():
    """`register_model_upscalers` into the global registry for one test; what it added is removed afterwards."""
    from pipelines.model_upscale import LOADED, register_model_upscalers
    from pipelines.upscale import UPSCALERS

    before = set(UPSCALERS.names())
    yield register_model_upscalers
    for name in set(UPSCALERS.names()) - before:
        UPSCALERS.unregister(name)
    LOADED.clear()
