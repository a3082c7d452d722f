import pytest


@pytest.fixture(scope="session")
def sd1_pipe(tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


# Fixtures whose model outlives one test: the session's pipelines, and the models and pipelines loaded once per test
# module (tests/conftest.py's sd1_model / sdxl_model, inpaint_pipe, base_pipe, refiner_model below); a pipeline is
# checked through its `.model`.
SHARED_PIPES = ("sd1_pipe", "sdxl_pipe", "inpaint_pipe", "base_pipe")
SHARED_MODELS = ("sd1_model", "sdxl_model", "refiner_model")


@pytest.fixture(autouse=True)
def shared_pipes_left_as_found(request):
    """Fails a test that leaves a forward patch or hook on a model another test will use (`SHARED_PIPES`,
    `SHARED_MODELS`: a spy put back as the bound method, a wrapper a pipeline call forgot when it raised) and takes it
    off, so no later test sees a model that depends on test order. Only tests that use one (directly or through a
    fixture) are checked: the walk over a tiny model's modules costs a few milliseconds."""
    used = [name for name in (*SHARED_PIPES, *SHARED_MODELS) if name in request.fixturenames]
    if not used:
        yield
        return
    from .model_patches import describe, model_patches, remove_patches

    models = {name: request.getfixturevalue(name) for name in used}
    models = {name: value.model if name in SHARED_PIPES else value for name, value in models.items()}
    before = {name: model_patches(model) for name, model in models.items()}
    yield
    for name, model in models.items():
        left = {key: value for key, value in model_patches(model).items() if key not in before[name]}
        if left:
            remove_patches(left)
            pytest.fail(f"the test left patches on the shared {name}: {describe(left)}; restore a replaced forward "
                        "by removing the instance attribute (tests/pipelines/unet_spy.replaced_forward) and remove "
                        "hooks")


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


