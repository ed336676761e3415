#!/usr/bin/env bash
# Stage what scripts/gpu_annotate_coder15b.sh needs into the git-ignored .gpu/ (one device transfer is 64 MiB):
# the 1.5B GGUF (assembled and sha256-checked by udcg_ltr) in 64,000,000-byte pieces g00..g17, and in g17 the
# wheels the GPU image lacks plus the shared data the cells read. Run after `bash scripts/dev.sh setup`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p .git/info && (grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude)
rm -rf .gpu && mkdir -p .gpu/tmp
"$PY" - <<'PYEOF'
from udcg_ltr.annotate import demo_llm
preset = demo_llm.coder15b_preset()
demo_llm.assemble_gguf(preset, demo_llm.part_paths(preset), ".gpu/tmp/model.gguf")
PYEOF
(cd .gpu/tmp && split -b 64000000 -d -a 2 model.gguf g && rm model.gguf)
for f in .gpu/tmp/g??; do mkdir -p ".gpu/$(basename "$f")" && mv "$f" ".gpu/$(basename "$f")/"; done
for spec in hydra-core==1.3.2 omegaconf==2.3.0 gguf; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform any --platform manylinux_2_17_x86_64 -d .gpu/g17/whl "$spec"
done
"$PY" -m pip download -q --no-deps -d .gpu/tmp antlr4-python3-runtime==4.9.3
"$PY" -m pip wheel -q --no-deps -w .gpu/g17/whl .gpu/tmp/antlr4-python3-runtime-4.9.3.tar.gz
data=${UDCG_LTR_DATA:-../shared/data}
mkdir -p .gpu/g17/data/annotated_full .gpu/g17/data/hotpotqa
cp "$data"/annotated_full/squad_*.jsonl.gz "$data"/annotated_full/meta.json .gpu/g17/data/annotated_full/
cp "$data"/hotpotqa/dev_300.jsonl.gz .gpu/g17/data/hotpotqa/
rm -rf .gpu/tmp
du -sh .gpu/*
