"""`mixkit.io.audio`: waveforms written as 16-bit PCM .wav (stdlib `wave` as the reader oracle), checked before
anything is written, never half-written."""

from __future__ import annotations

import wave

import numpy as np
import pytest

from mixkit.io.audio import pcm16, read_wav, wav_bytes, write_wav


def test_samples_are_clipped_scaled_by_32767_and_rounded():
    samples = np.array([0.0, 0.5, -1.0, 1.0, 1.5, -2.0, 0.25], dtype=np.float32)
    # 0.5 * 32767 = 16383.5 rounds to even (16384); out-of-range samples clip to +-32767
    assert pcm16(samples).tolist() == [0, 16384, -32767, 32767, 32767, -32767, 8192]


def test_a_mono_clip_is_written_as_16_bit_pcm_and_reads_back(tmp_path):
    samples = np.linspace(-0.9, 0.9, 321, dtype=np.float32)
    path = write_wav(samples, tmp_path / "clip.wav", 16000)
    with wave.open(str(path), "rb") as file:
        assert (file.getnchannels(), file.getsampwidth(), file.getframerate(), file.getnframes()) == (1, 2, 16000, 321)
        stored = np.frombuffer(file.readframes(321), dtype="<i2")
    assert np.array_equal(stored, pcm16(samples))
    read, rate = read_wav(path)
    assert rate == 16000 and read.dtype == np.float32
    assert np.array_equal(read, pcm16(samples).astype(np.float32) / 32768.0)
    assert path.read_bytes() == wav_bytes(samples, 16000)


def test_channels_are_interleaved_and_int16_is_kept_exactly(tmp_path):
    stereo = np.array([[100, -100], [32767, -32768], [300, -300]], dtype=np.int16)
    path = write_wav(stereo, tmp_path / "stereo.wav", 8000)
    with wave.open(str(path), "rb") as file:
        assert (file.getnchannels(), file.getframerate()) == (2, 8000)
        assert np.frombuffer(file.readframes(3), dtype="<i2").tolist() == [100, -100, 32767, -32768, 300, -300]
    read, _ = read_wav(path)
    assert read.shape == (3, 2) and np.array_equal(np.round(read * 32768).astype(np.int16), stereo)


def test_a_torch_tensor_is_taken(tmp_path):
    import torch

    read, _ = read_wav(write_wav(torch.tensor([0.5, -0.5]), tmp_path / "t.wav"))
    assert (read * 32768).tolist() == [16384.0, -16384.0]


@pytest.mark.parametrize("waveform, rate, name, error, message", [
    (np.zeros(4, np.float32), 16000, "clip.mp3", ValueError, "the extension must be .wav"),
    (np.zeros(4, np.float32), 0, "clip.wav", ValueError, r"rate must be an integer .* in \[1, 768000\], got 0"),
    (np.zeros(4, np.float32), 16000.0, "clip.wav", ValueError, "rate must be an integer"),
    (np.array([0.1, np.nan], np.float32), 16000, "clip.wav", ValueError, "NaN or infinite"),
    (np.zeros(0, np.float32), 16000, "clip.wav", ValueError, r"at least one sample, got shape \(0,\)"),
    (np.zeros((2, 2, 2), np.float32), 16000, "clip.wav", ValueError, r"got shape \(2, 2, 2\)"),
    (np.zeros(4, np.int32), 16000, "clip.wav", TypeError, "must be int16 PCM, got int32"),
    ([0.1, 0.2], 16000, "clip.wav", TypeError, "must be a numpy array"),
])
def test_bad_values_are_refused_and_an_existing_file_is_left_as_it_was(tmp_path, waveform, rate, name, error,
                                                                       message):
    target = tmp_path / name
    target.write_bytes(b"old")
    with pytest.raises(error, match=message):
        write_wav(waveform, target, rate)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="the folder .*missing.* does not exist"):
        write_wav(np.zeros(4, np.float32), tmp_path / "missing" / "clip.wav")


def test_a_file_that_is_no_wav_is_refused_on_reading(tmp_path):
    (tmp_path / "bad.wav").write_bytes(b"not a wav")
    with pytest.raises(ValueError, match="is not a readable PCM .wav file"):
        read_wav(tmp_path / "bad.wav")
