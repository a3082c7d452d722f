#!/usr/bin/env bash
# Installs what tests/webui/test_browser.py needs: Debian's chromium and Playwright's Python
# package (only the package: `playwright install` would download its own browser, which CI
# machines without internet cannot do, and the Debian build is what the test launches).
set -euo pipefail
PYTHON="${PYTHON:-python}"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi
"$PYTHON" -m pip install "playwright>=1.40"
chromium --version
"$PYTHON" -c "import playwright; print('playwright', __import__('importlib.metadata').metadata.version('playwright'))"
