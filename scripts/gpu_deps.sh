#!/usr/bin/env bash
# gpu_deps.sh: prepares .gpudeps/ (git-ignored) for the offline GPU machine of scripts/gpu_check.sh,
# which has CUDA, a C/C++ compiler and PyTorch but none of our build dependencies and no network.
# Nothing in it is listed by hand: scripts/gpu_needs.py derives from the build (the headers the
# sources include, the files the link line resolves to, the NEEDED closure of those libraries and
# of every package that provides one, the tools CC / mpirun / make) what the build takes from
# this machine beyond the toolchain, as .gpudeps/MANIFEST; this script then downloads each
# package MANIFEST names, at the version installed here (the one the build was derived against)
# or, where the archive no longer has that version, the archive's (said on a line). gpu_check.sh
# unpacks them with `dpkg -x` into a private prefix, never into /, checks every need of MANIFEST
# against it, and its rehearsal hides this machine's copies of them.
# Run on a Debian 12 machine with the build's packages installed (scripts/install-deps.sh) and
# apt's lists (no root needed for `apt-get download`), from any directory:
#   bash scripts/gpu_deps.sh && du -sh .gpudeps
# Env: GPUDEPS_DIR (where to write; default .gpudeps), GPU_NEEDS_MANIFEST (a manifest gpu_needs.py
# already wrote, used instead of deriving again).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${GPUDEPS_DIR:-.gpudeps}
case $out in /*) ;; *) out=$PWD/$out ;; esac
tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
if [ -n "${GPU_NEEDS_MANIFEST:-}" ]; then
    cp "$GPU_NEEDS_MANIFEST" "$tmp/MANIFEST"
else
    python3 scripts/gpu_needs.py >"$tmp/MANIFEST" || { echo "gpu_deps: deriving the build's needs failed (above)" >&2; exit 1; }
fi
n=0 fell_back=()
while read -r rec pkg ver _; do
    [ "$rec" = package ] || continue
    if (cd "$tmp" && apt-get download "$pkg=$ver" >/dev/null 2>&1); then :
    elif (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>"$tmp/err"); then fell_back+=("$pkg")
    else echo "gpu_deps: apt-get download $pkg failed: $(tail -1 "$tmp/err"); run apt-get update, or install $pkg" >&2; exit 1; fi
    f=$(cd "$tmp" && ls -t "${pkg}"_*.deb | head -1)
    echo "deb $pkg $f" >>"$tmp/MANIFEST"
    n=$((n + 1))
done <"$tmp/MANIFEST"
rm -f "$tmp/err"
rm -rf "$out"
mv "$tmp" "$out"
for p in "${fell_back[@]}"; do
    echo "gpu_deps: $p: the installed version is no longer in the archive; packed $(grep "^deb $p " "$out/MANIFEST" | cut -d' ' -f3)"
done
echo "$n packages in $out ($(grep -c '^need ' "$out/MANIFEST") needs of the build; $(grep -c ' base$' "$out/MANIFEST") of the packages" \
    "are base ones the machine's own copy may serve at run time), $(du -sh "$out" | cut -f1)"
