#!/usr/bin/env bash
# Installs the Debian 12 packages myriad needs to build and test (only those missing).
# Build: gcc, make, OpenBLAS, cJSON, libmicrohttpd (the launcher's /metrics), Open MPI, PCRE2 and
# zlib (tokenizers, gzip input). Tests: python3-torch (PyTorch oracle), numpy, jq (launcher event
# checks), iproute2 (network-namespace hosts and tc for the launcher and doctor tests), prometheus
# (promtool and a real server scraping /metrics), Slurm + munge (the Slurm tests start their own
# slurmctld/slurmd; srun --mpi=pmix loads libpmix.so from libpmix-dev), chromium (renders
# `myriad report` pages in tests/test_report.sh; large, ~350 MB installed, but proving that a
# report really draws needs a real browser; without it that test skips).
set -euo pipefail
pkgs=(build-essential libopenblas-dev libcjson-dev libmicrohttpd-dev openmpi-bin libopenmpi-dev libpcre2-dev zlib1g-dev python3-numpy
      python3-torch jq iproute2 prometheus slurmctld slurmd slurm-client munge libpmix-dev chromium)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
