import pytest


@pytest.fixture
def tiny_unet(tiny_sd1_dir):
    """A fresh fp32 UNet per test: the tests change modules in place."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet").eval()


@pytest.fixture
def tiny_vae_model(tiny_sd1_dir):
    from diffusers import AutoencoderKL

    return AutoencoderKL.from_pretrained(tiny_sd1_dir, subfolder="vae").eval()


@pytest.fixture
def unet_inputs(tiny_unet):
    import torch

    gen = torch.Generator().manual_seed(0)
    sample = torch.randn(2, 4, 8, 8, generator=gen)
    context = torch.randn(2, 77, tiny_unet.config.cross_attention_dim, generator=gen)
    return sample, torch.tensor(500), context


@pytest.fixture(scope="session")
def ov_cache(tmp_path_factory):
    """One OpenVINO cache folder for the session: later tests reuse what earlier ones converted."""
    return tmp_path_factory.mktemp("ov-shared-cache")
