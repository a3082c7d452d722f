import pytest


@pytest.fixture(scope="session")
def sd1_pipe(tiny_sd1_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="session")
def sdxl_pipe(tiny_sdxl_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


SMALL = dict(width=64, height=64, steps=4)
