"""The OpenVINO VAE against the torch VAE it was converted from (decoder and encoder, static shapes)."""

import pytest
import torch

pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")

from mixkit.runtime.backends import export_identity  # noqa: E402
from mixkit.runtime.openvino_vae import OpenVinoVae  # noqa: E402


@pytest.fixture(scope="module")
def ov_vae(sd1_model, ov_cache):
    return OpenVinoVae(sd1_model.vae, cache_dir=ov_cache, identity=export_identity(sd1_model))


def test_decode_matches_torch_and_converts_once_per_size(sd1_model, ov_vae):
    z = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = sd1_model.vae.decode(z).sample
    got = ov_vae.decode(z).sample
    assert got.dtype == torch.float32 and got.shape == expected.shape == (2, 3, 64, 64)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # both images ran through one static [1, 4, 8, 8] graph, converted (not found) this time
    assert list(ov_vae.cache_hits.items()) == [(("decoder", (1, 4, 8, 8)), False)]
    readable = ov_vae.cache_paths[("decoder", (1, 4, 8, 8))].with_suffix(".json").read_text()
    assert '"model_hash": "' + sd1_model.model_hash + '"' in readable and '"shapes"' in readable
    # return_dict=False is diffusers' tuple form
    torch.testing.assert_close(ov_vae.decode(z[:1], return_dict=False)[0], expected[:1], rtol=1e-4, atol=1e-4)


def test_encode_matches_torch_posterior(sd1_model, ov_vae):
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        expected = sd1_model.vae.encode(x).latent_dist
    got = ov_vae.encode(x).latent_dist
    torch.testing.assert_close(got.mean, expected.mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.std, expected.std, rtol=1e-4, atol=1e-4)


def test_a_second_stand_in_reuses_the_cached_graph(sd1_model, ov_vae, ov_cache):
    again = OpenVinoVae(sd1_model.vae, cache_dir=ov_cache, identity=export_identity(sd1_model))
    z = torch.randn(1, 4, 8, 8)
    torch.testing.assert_close(again.decode(z).sample, ov_vae.decode(z).sample)
    assert again.cache_hits == {("decoder", (1, 4, 8, 8)): True}


def test_features_the_graph_lacks_are_refused(ov_vae):
    with pytest.raises(AttributeError, match="enable_tiling.*backend='torch'"):
        ov_vae.enable_tiling()
    with pytest.raises(ValueError, match=r"\[batch, 4, height, width\].*\(4, 8, 8\)"):
        ov_vae.decode(torch.zeros(4, 8, 8))
    with pytest.raises(ValueError, match="decode\\(\\) and encode\\(\\) only"):
        ov_vae(torch.zeros(1, 3, 64, 64))
