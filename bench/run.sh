#!/usr/bin/env bash
# `make bench`: every benchmark, each printing its figures and ratios against a baseline
# measured in the same run. Not part of the tests. Results worth keeping are recorded in
# bench/*.md with the command that produced them.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== training step (issue 2): myriad vs PyTorch CPU, gpt2-124m shape"
bash bench/train_step.sh
echo "== collectives (issue 3): all-reduce on 4 ranks, MPI vs hierarchical (2 ranks per emulated node)"
bin/myriad run -n 4 -- bench comm -c all_reduce -b 8 -e 8M -f 4 -n 20 -w 5 --trials 3 --algo mpi,hier --ranks-per-node 2
echo "== context parallelism (issue 27): step time and memory per rank at cp 1, 2, 4"
bash bench/cp_scale.sh 4096 3
echo "== simulator on its own cp steps (issue 27): predicted vs measured cp 1 and cp 2 (one round)"
bash bench/sim_cp_own_runs.sh 1 4 cp1,cp2
echo "== simulator speed (issue 6)"
bash bench/sim_speed.sh
echo "== checkpoints (issue 5): save / async / verified load vs plain I/O"
bash bench/ckpt_bench.sh
echo "== operations (issue 14): straggler false positives, heartbeat timing overhead, supervisor at 10,000 ranks"
bash bench/straggler_fp.sh 3 200
bash bench/hb_overhead.sh 4
bash bench/supervisor_scale.sh 10000 1 30
echo "== goodput (issue 30): predicted vs measured effective training time of fault soaks at MTBF 20 and 60 s"
bash bench/goodput_predict.sh
