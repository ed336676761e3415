#!/usr/bin/env bash
# The 1.5B reader's two grid cells on a lent GPU, from the parts that scripts/stage_coder15b.sh put in .gpu/
# (g00..g16: the GGUF in 64 MB pieces, one device transfer each; g17: the last piece, the wheels the GPU image
# lacks and the shared data the cells read). Run from the project root there; cells land in ${OUT:-/tmp/out}.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/g17/whl/*.whl
export PYTHONPATH=$PWD:/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
export UDCG_LTR_DATA=$PWD/.gpu/g17/data UDCG_LTR_CACHE=/tmp/udcache
models=/tmp/udcache/models
gguf=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
mkdir -p "$models"
# PIECES: where earlier transfers moved g00..g16 (a carried path is replaced by the next call's copy)
pieces=${PIECES:-/tmp/p}
mkdir -p "$pieces" && mv .gpu/g*/g?? "$pieces/"
cat "$pieces"/g?? > "$models/$gguf"
echo "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046  $models/$gguf" | sha256sum -c -
out=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 bench/annotate_grid.py --budget-seconds "${BUDGET:-380}" \
  --common llm=qwen2.5-coder-1.5b llm.device=cuda "llm.model=$models" "llm.gguf_file=$gguf" \
           llm.batch_size=256 +llm.max_batch_tokens=131072 progress=false \
  --cell dataset=hotpotqa "plan.output=$out/hotpotqa" \
  --cell dataset=annotated_squad_full 'plan.questions={test: 600, train: 1400}' plan.chunk_questions=50 "plan.output=$out/squad" \
  2>&1 | grep -v -e Warning -e forward_call -e deprecated
