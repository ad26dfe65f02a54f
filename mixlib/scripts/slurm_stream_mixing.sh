#!/usr/bin/env bash
# Analysis A on a Slurm cluster: one array task per shard of `python -m mixlib stream-mixing`.
#
#   sbatch --array=0-7 --export=ALL,MIXLIB_SHARDS=8 slurm_stream_mixing.sh TEXTS OUT [MODEL [options ...]]
#   sbatch --dependency=afterok:<the array's job id> --wrap "python -m mixlib merge --chunks OUT --out RESULTS"
#
# Task i runs --shard i/$MIXLIB_SHARDS into the same OUT (a folder every node sees): chunk k goes to task
# k % MIXLIB_SHARDS. The number of shards is given, not read from the array, so that a task that failed or
# was pre-empted is simply submitted again on its own (sbatch --array=3 --export=ALL,MIXLIB_SHARDS=8 ...):
# it resumes, skipping the chunk files it finished, and duplicates no row. MODEL defaults to bert-base-uncased; on nodes without
# a network, download it once (`hf download bert-base-uncased`) and export HF_HUB_OFFLINE=1.
# MIXLIB_PYTHON names the Python that has mixlib (default: python).
#SBATCH --job-name=mixlib-stream
#SBATCH --cpus-per-task=4
#SBATCH --time=04:00:00
#SBATCH --output=mixlib-stream-%A_%a.log
set -euo pipefail
usage="usage: sbatch --array=0-(n-1) --export=ALL,MIXLIB_SHARDS=n $0 TEXTS OUT [MODEL [stream-mixing options ...]]"
texts=${1:?$usage}
out=${2:?$usage}
model=${3:-bert-base-uncased}
shift $(( $# < 3 ? $# : 3 ))
i=${SLURM_ARRAY_TASK_ID:?not an array task: submit with sbatch --array=0-(n-1) (or set SLURM_ARRAY_TASK_ID)}
n=${MIXLIB_SHARDS:?set MIXLIB_SHARDS to the number of shards, e.g. sbatch --array=0-7 --export=ALL,MIXLIB_SHARDS=8}
# one thread per CPU Slurm gave this task
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-${OMP_NUM_THREADS:-1}}
exec "${MIXLIB_PYTHON:-python}" -m mixlib stream-mixing --model "$model" --texts "$texts" --out "$out" \
    --shard "$i/$n" "$@"
