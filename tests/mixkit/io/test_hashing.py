"""Model hashes against values computed independently here with hashlib."""

from __future__ import annotations

import hashlib
import random

import pytest
import torch
from safetensors.torch import save_file

from mixkit.io.hashing import (
    a1111_model_hash,
    addnet_hash_safetensors,
    addnet_sha256_safetensors,
    legacy_a1111_hash,
    model_hash_matches,
    sha256_file,
)


@pytest.fixture
def big_file(tmp_path):
    """1.2 MiB of seeded random bytes: past the legacy hash window at 1 MiB + 64 KiB."""
    path = tmp_path / "model.ckpt"
    path.write_bytes(random.Random(0).randbytes(0x130000))
    return path


@pytest.fixture
def lora(tmp_path):
    path = tmp_path / "lora.safetensors"
    save_file({"lora_up.weight": torch.arange(12.0).reshape(3, 4)}, path, metadata={"ss_output_name": "a"})
    return path


def test_sha256_and_a1111_hash(big_file):
    expected = hashlib.sha256(big_file.read_bytes()).hexdigest()
    assert sha256_file(big_file) == expected
    assert a1111_model_hash(big_file) == expected[:10]


def test_legacy_hash_reads_64k_at_1m(big_file):
    data = big_file.read_bytes()
    assert legacy_a1111_hash(big_file) == hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]


def test_legacy_hash_of_small_file_hashes_nothing(lora):
    assert legacy_a1111_hash(lora) == hashlib.sha256(b"").hexdigest()[:8]


def test_addnet_hash_skips_the_header(lora):
    data = lora.read_bytes()
    header_length = int.from_bytes(data[:8], "little")
    expected = hashlib.sha256(data[8 + header_length:]).hexdigest()
    assert addnet_sha256_safetensors(lora) == expected
    assert addnet_hash_safetensors(lora) == expected[:12]


def test_addnet_hash_ignores_metadata_but_sha256_does_not(lora, tmp_path):
    other = tmp_path / "renamed.safetensors"
    save_file({"lora_up.weight": torch.arange(12.0).reshape(3, 4)}, other, metadata={"ss_output_name": "something else"})
    assert addnet_hash_safetensors(other) == addnet_hash_safetensors(lora)
    assert sha256_file(other) != sha256_file(lora)


def test_addnet_hash_refuses_non_safetensors(big_file, tmp_path):
    pt = tmp_path / "w.pt"
    torch.save({"w": torch.ones(1)}, pt)
    with pytest.raises(ValueError, match=r"w\.pt.*only defined for safetensors"):
        addnet_hash_safetensors(pt)


def test_infotext_model_hash_of_either_era_matches_the_same_file(big_file, tmp_path):
    # pre-2023 A1111 wrote the 8-digit legacy hash (sd_models.model_hash), A1111 >= 1.0 the sha256's first 10
    data = big_file.read_bytes()
    legacy = hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]
    full = hashlib.sha256(data).hexdigest()
    for written in (legacy, legacy.upper(), full[:10], full, f" {full[:10]} "):
        assert model_hash_matches(written, big_file), written
    other = tmp_path / "other.ckpt"
    other.write_bytes(random.Random(1).randbytes(0x130000))
    for written in (legacy, full[:10], full[:8], ""):
        assert not model_hash_matches(written, other), written
    assert not model_hash_matches(full[:8], big_file)  # 8 digits are the legacy hash, never a sha256 prefix
