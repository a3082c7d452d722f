"""The on-disk hash cache: hit while a file is unchanged, miss after any change, never an error."""

from __future__ import annotations

import hashlib
import json
import os
import random

import pytest
import torch
from safetensors.torch import save_file

from mixkit.io.hash_cache import hash_cache_file
from mixkit.io.hashing import addnet_sha256_safetensors, sha256_file


@pytest.fixture
def big_file(tmp_path):
    path = tmp_path / "model.ckpt"
    path.write_bytes(random.Random(1).randbytes(3 << 20))
    return path


@pytest.fixture
def lora(tmp_path):
    path = tmp_path / "lora.safetensors"
    save_file({"w": torch.ones(3)}, path)
    return path


def test_cache_is_used_while_file_is_unchanged(big_file, isolated_hash_cache):
    real = sha256_file(big_file)
    cache_file = isolated_hash_cache / "hashes.json"
    assert hash_cache_file() == cache_file
    payload = json.loads(cache_file.read_text())
    entry = payload["entries"][str(big_file.resolve())]
    assert entry["sha256"] == real and entry["size"] == big_file.stat().st_size
    # plant a fake value: if it comes back, the file was not re-read
    entry["sha256"] = "f" * 64
    cache_file.write_text(json.dumps(payload))
    assert sha256_file(big_file) == "f" * 64
    assert sha256_file(big_file, use_cache=False) == real


def test_changed_file_is_rehashed(big_file):
    sha256_file(big_file)
    with open(big_file, "ab") as handle:
        handle.write(b"more")
    assert sha256_file(big_file) == hashlib.sha256(big_file.read_bytes()).hexdigest()


def test_same_size_rewrite_is_detected_by_mtime(big_file):
    sha256_file(big_file)
    data = bytearray(big_file.read_bytes())
    data[0] ^= 0xFF
    big_file.write_bytes(bytes(data))
    stat = big_file.stat()
    os.utime(big_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert sha256_file(big_file) == hashlib.sha256(bytes(data)).hexdigest()


def test_both_kinds_share_one_entry(lora, isolated_hash_cache):
    sha256_file(lora)
    addnet_sha256_safetensors(lora)
    entry = json.loads((isolated_hash_cache / "hashes.json").read_text())["entries"][str(lora.resolve())]
    assert {"sha256", "addnet_sha256", "size", "mtime_ns"} <= set(entry)


def test_corrupt_cache_is_ignored_and_rebuilt(big_file, isolated_hash_cache, caplog):
    isolated_hash_cache.mkdir()
    (isolated_hash_cache / "hashes.json").write_text("{not json")
    assert sha256_file(big_file) == hashlib.sha256(big_file.read_bytes()).hexdigest()
    assert "unreadable hash cache" in caplog.text
    assert json.loads((isolated_hash_cache / "hashes.json").read_text())["version"] == 1


def test_unwritable_cache_still_returns_the_hash(big_file, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("x")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(blocker))
    assert sha256_file(big_file) == hashlib.sha256(big_file.read_bytes()).hexdigest()
    assert "Could not update the hash cache" in caplog.text
    assert f"MIXKIT_CACHE_DIR={blocker} is a file, not a folder" in caplog.text  # the setting to fix, named


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("MIXKIT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hash_cache_file() == tmp_path / ".cache" / "mixkit" / "hashes.json"
