#!/usr/bin/env bash
# gpu_deps.sh: prepares .gpudeps/ (git-ignored), the Debian 12 packages myriad needs to build and
# run on a GPU machine that has CUDA, a C compiler and PyTorch but none of our build dependencies
# and no network (the device machine of scripts/gpu_check.sh). It travels with the tree (the
# device tool's `carry`); gpu_check.sh unpacks it with `dpkg -x` into a private prefix, never /.
#   OpenBLAS (pthread build) + libgfortran/libquadmath, cJSON, Open MPI 4.1 with the libraries it
#   loads (PMIx, hwloc, libevent, libfabric, UCX, verbs, PSM, numactl, munge), and GNU make in
#   case the machine lacks it.
# Not included: what every glibc system has (libc, libgcc, libstdc++, zlib, libudev).
# Run on a Debian 12 machine with apt (no root needed for `apt-get download`):
#   bash scripts/gpu_deps.sh && du -sh .gpudeps
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(
    libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
    libcjson1 libcjson-dev
    openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
    libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1
    libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libatomic1 libltdl7
    make
)
rm -rf .gpudeps.tmp
mkdir -p .gpudeps.tmp
(cd .gpudeps.tmp && apt-get download "${pkgs[@]}" >/dev/null)
rm -rf .gpudeps
mv .gpudeps.tmp .gpudeps
ls .gpudeps/*.deb | wc -l | xargs printf '%s packages in .gpudeps, '
du -sh .gpudeps | cut -f1
