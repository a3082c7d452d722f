import pytest


@pytest.fixture(scope="session")
def sd1_pipe(tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="session")
def sdxl_pipe(tiny_sdxl_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


@pytest.fixture(scope="session")
def tiny_sd1_inpaint_dir(tmp_path_factory):
    """A tiny 9-channel SD 1.x inpainting checkpoint folder (seed 0), built once per session."""
    from mixkit.testing.tiny_controlnet import build_tiny_sd1_inpaint

    return build_tiny_sd1_inpaint(tmp_path_factory.mktemp("tiny-sd1-inpaint"), seed=0)


@pytest.fixture(scope="module")
def inpaint_pipe(tiny_sd1_inpaint_dir):
    """img2img on the tiny 9-channel inpainting checkpoint, loaded through the public path."""
    from pipelines.img2img import ImageToImage

    pipe = ImageToImage.from_pretrained(tiny_sd1_inpaint_dir)
    assert pipe.model.unet.config.in_channels == 9
    return pipe


@pytest.fixture(scope="module")
def picture():
    """A 64x64 noise picture (seed 3) for img2img and inpainting tests."""
    from .tiny_images import noise_picture

    return noise_picture(3)


@pytest.fixture(scope="session")
def tiny_controlnet_dir(tmp_path_factory):
    """A tiny SD 1.x ControlNet folder (seed 0, zero convolutions woken so it changes the result)."""
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    return build_tiny_controlnet(tmp_path_factory.mktemp("tiny-cn"), seed=0)


@pytest.fixture(scope="module")
def controlnet(tiny_controlnet_dir):
    """The tiny ControlNet, loaded per test module (tests hook into it; a module's hooks stay its own)."""
    from pipelines.controlnet import load_controlnet

    return load_controlnet(tiny_controlnet_dir)


@pytest.fixture(scope="module")
def refiner_model(tiny_sdxl_refiner_dir):
    """The tiny SDXL refiner, loaded per test module."""
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sdxl_refiner_dir)


SMALL = dict(width=64, height=64, steps=4)


@pytest.fixture(scope="module")
def base_pipe(tiny_sdxl_dir):
    """A TextToImage on the tiny SDXL base for refiner tests, per module (a refiner run keeps the refiner loaded in
    the pipeline's session, so no module shares it with another)."""
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


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


@pytest.fixture()
def release_files(tmp_path):
    """A folder of model upscaler files named as A1111's downloads (DAT_x2, SwinIR_4x, a Real-ESRGAN release) and one
    community file, each a tiny network."""
    from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_RRDB, TINY_SRVGG, TINY_SWINIR, save_upscaler, tiny_upscaler

    save_upscaler(tiny_upscaler(TINY_DAT, seed=1), tmp_path / "DAT_x2.pth", "dat", wrapper="params")
    save_upscaler(tiny_upscaler(TINY_SWINIR, seed=2), tmp_path / "SwinIR_4x.pth", "swinir", wrapper="params_ema")
    save_upscaler(tiny_upscaler(TINY_SRVGG, seed=3), tmp_path / "realesr-general-x4v3.pth", "srvgg")
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=4), tmp_path / "4x-UltraSharp.pth", "esrgan")
    return tmp_path




# -- IP-Adapter (tests/pipelines/test_ip_adapter*.py; helpers in ip_adapter_helpers.py) ----------------------------


@pytest.fixture(scope="module")
def ip_pipe(sd1_pipe):
    """IP-Adapter text-to-image on the tiny SD 1.x model (shares its model with sd1_pipe)."""
    from pipelines.ip_adapter import IPAdapterTextToImage

    return IPAdapterTextToImage.from_pipeline(sd1_pipe)


@pytest.fixture(scope="module")
def adapter_file(sd1_pipe, tmp_path_factory):
    """h94's layout: models/ip-adapter_tiny.safetensors beside models/image_encoder."""
    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

    return save_tiny_ip_adapter(tmp_path_factory.mktemp("h94") / "models", sd1_pipe.model.unet)


@pytest.fixture(scope="module")
def second_adapter(sd1_pipe, tmp_path_factory):
    """Another plain tiny adapter (seed 5) with its own encoder folder."""
    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

    return save_tiny_ip_adapter(tmp_path_factory.mktemp("second") / "models", sd1_pipe.model.unet,
                                name="ip-adapter_other", seed=5)


@pytest.fixture(scope="module")
def plus_adapter_file(sd1_pipe, tmp_path_factory):
    """A tiny IP-Adapter Plus in h94's single-file layout (Resampler keys), beside its image encoder."""
    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

    return save_tiny_ip_adapter(tmp_path_factory.mktemp("h94-plus") / "models", sd1_pipe.model.unet,
                                name="ip-adapter-plus_tiny", kind="plus", seed=3)
