"""`import mixkit.io` stays cheap: heavy libraries load only when a function needs them."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_load_torch_safetensors_or_hub():
    code = (
        "import sys, mixkit.io; "
        "print(sorted(m for m in ('torch', 'safetensors', 'huggingface_hub') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"
