"""AppFlow's transformers loaders without network: fail fast with a clear message, or load from the cache.

Each case runs in a fresh Python process, because huggingface_hub and transformers read HF_HOME,
HF_ENDPOINT and HF_HUB_OFFLINE when they are imported, exactly as a user's run would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, so connecting is refused at once
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# Every loader that hands a hub id to transformers, with the default model of its role.
HUB_LOADERS = {
    "grounding-dino": "IDEA-Research/grounding-dino-tiny",
    "sam": "facebook/sam-vit-base",
    "causal-lm": "Qwen/Qwen2.5-0.5B-Instruct",
}

FAIL_EACH = textwrap.dedent("""
    import json, sys, time
    from appflow import Appflow, MODEL_KINDS
    from PIL import Image
    report = {}
    for kind, source in json.loads(sys.argv[1]).items():
        start = time.monotonic()
        try:
            MODEL_KINDS.get(kind).load(source, "cpu", None)
            report[kind] = ["loaded", time.monotonic() - start]
        except Exception as error:
            report[kind] = [f"{type(error).__name__}: {error}", time.monotonic() - start]
    flow = Appflow("openset_det_sam")  # builds without network: configs only, and these are not cached
    start = time.monotonic()
    try:
        flow(image=Image.new("RGB", (32, 32)), prompt="dog")
        report["app"] = ["ran", time.monotonic() - start]
    except Exception as error:
        report["app"] = [f"{type(error).__name__}: {error}", time.monotonic() - start]
    print(json.dumps(report))
""")


def run_offline(script: str, argument: str, hf_home, **env_vars: str) -> tuple[dict, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HUB_CACHE", "HF_HOME")}
    # huggingface_hub's warnings on, so a retry ("Retrying in 8s") shows in stderr whatever the caller's settings.
    env.update(HF_HOME=str(hf_home), HF_HUB_VERBOSITY="warning", OMP_NUM_THREADS="1", **env_vars)
    # A timeout well below the ~46 s per model of transformers' retries, so a regression fails instead of hanging.
    done = subprocess.run([sys.executable, "-c", script, argument], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize("network, cause", [({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
                                            ({"HF_ENDPOINT": UNREACHABLE}, "the hub is unreachable")],
                         ids=["HF_HUB_OFFLINE", "unreachable-hub"])
def test_an_uncached_hub_id_fails_at_once_naming_the_model_and_what_to_do(tmp_path, network, cause):
    report, stderr = run_offline(FAIL_EACH, json.dumps(HUB_LOADERS), tmp_path / "empty-hf-home", **network)
    assert "Retrying" not in stderr and "thrown while requesting" not in stderr
    for kind, source in [*HUB_LOADERS.items(), ("app", HUB_LOADERS["grounding-dino"])]:
        message, seconds = report[kind]
        assert seconds < 2, f"{kind}: {seconds:.1f} s"
        assert message.startswith(f"ModelNotFoundError: Cannot load {source!r}"), message
        assert "is not in the Hugging Face cache" in message and cause in message
        assert f"Download it once with network access (`hf download {source}`), or pass a local folder" in message


def test_a_cached_model_loads_without_waiting_for_an_unreachable_hub(tmp_path, tiny_sam_dir):
    """transformers alone would retry the hub for ~23 s per file before falling back to its cache."""
    repo = tmp_path / "hf-home" / "hub" / "models--org--tiny-sam"
    shutil.copytree(tiny_sam_dir, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    for network in ({"HF_ENDPOINT": UNREACHABLE}, {"HF_HUB_OFFLINE": "1"}):
        report, stderr = run_offline(FAIL_EACH, json.dumps({"sam": "org/tiny-sam"}), tmp_path / "hf-home", **network)
        assert report["sam"][0] == "loaded", report["sam"][0]
        assert "Retrying" not in stderr and "thrown while requesting" not in stderr


def test_a_local_folder_missing_its_weights_names_the_folder_and_what_to_do(tmp_path, tiny_sam_dir):
    from appflow import MODEL_KINDS
    from mixkit.errors import ModelNotFoundError

    folder = tmp_path / "sam-without-weights"
    folder.mkdir()
    shutil.copy(tiny_sam_dir / "config.json", folder)
    with pytest.raises(ModelNotFoundError, match=re.escape(f"Cannot load {str(folder)!r}: ") + ".*or pass a local folder"):
        MODEL_KINDS.get("sam").load(str(folder), "cpu", None)
