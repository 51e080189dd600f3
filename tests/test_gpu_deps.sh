#!/usr/bin/env bash
# test_gpu_deps.sh: the device check cannot fail on packaging (issue 26, acceptance 1). In the
# rehearsal's namespace, where every file of every package .gpudeps packs is hidden
# (scripts/gpu_check.sh --rehearse --deps-only: the dependency phase alone):
#  1. the complete .gpudeps passes: every need of MANIFEST is in the prefix, the link line links
#     and its program loads, mpirun starts a rank, every C source preprocesses;
#  2. each package removed in turn (its .deb gone): the rehearsal stops, naming it;
#  3. a package the derivation had missed (its .deb and every MANIFEST line of it gone; the hiding
#     as derived): the probes still stop the rehearsal naming its library: libgfortran5 (OpenBLAS
#     needs it: at link) and libpmix2 (loaded by mpirun's plugins only: at run); the hiding is real;
#  4. a stale .gpudeps (a need of today's build that MANIFEST lacks) is refused before anything runs.
# The .gpudeps used is build/gpudeps-test, made by scripts/gpu_deps.sh when missing or made for
# another link line or other includes (kept between runs: a download of ~25 MB).
# Skips (one line each) without root, unshare or overlayfs, off Debian, or without apt's archive.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
test_scratch gpudeps
CASES="rehearsal_deps_complete missing_each_package missed_by_derivation stale_gpudeps_refused"
skip_all() { for c in $CASES; do echo "skip $c ($1)"; done; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root for the rehearsal's mount namespace"
command -v unshare >/dev/null && command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null || skip_all "needs unshare, dpkg and apt"
mkdir -p "$T/lo" "$T/mnt"
unshare -m --propagation private mount -t overlay overlay -o "lowerdir=$T/lo:/usr" "$T/mnt" 2>/dev/null ||
    skip_all "no overlayfs in a mount namespace here"

# the cached .gpudeps, remade when the build's link line or its system includes changed
G=$PWD/build/gpudeps-test
key=$( (make -s print-LDLIBS; make -s print-CC; grep -rhoE '^\s*#\s*include\s*<[^>]+>' src tests | sort -u) | sha256sum | cut -c1-16)
if [ "$(cat "$G/key" 2>/dev/null)" != "$key" ]; then
    rm -rf "$G"
    if ! GPUDEPS_DIR="$G" bash scripts/gpu_deps.sh >"$T/deps.out" 2>&1; then
        skip_all "scripts/gpu_deps.sh could not make .gpudeps here: $(tail -1 "$T/deps.out")"
    fi
    echo "$key" >"$G/key"
fi
echo "# $(grep -c '^package ' "$G/MANIFEST") packages, $(grep -c '^need ' "$G/MANIFEST") needs in $G"

rehearse() { # GPUDEPS_DIR [ENV...]: the rehearsal's deps phase, its last line in $T/last
    local g=$1; shift
    env "$@" GPUDEPS_DIR="$g" GPU_NEEDS_MANIFEST="$G/MANIFEST" OUT="$T/out" timeout 300 \
        bash scripts/gpu_check.sh --rehearse --deps-only >"$T/stdout" 2>"$T/err"
    local rc=$?
    grep '^gpu_check: ' "$T/err" | tail -1 >"$T/last"
    return $rc
}
without() { # PKG DIR [ALL]: a copy of .gpudeps (hard links) without PKG's .deb (ALL: and its MANIFEST lines)
    rm -rf "$2" && mkdir -p "$2" && cp -l "$G"/*.deb "$2/" || return 1
    rm -f "$2/$(awk -v p="$1" '$1 == "deb" && $2 == p {print $3}' "$G/MANIFEST")"
    if [ -n "${3:-}" ]; then
        awk -v p="$1" '!($1 == "package" && $2 == p) && !($1 == "deb" && $2 == p) &&
            !($1 == "need" && ($2 == "file" ? $4 : $2 == "data" ? $3 : $5) == p)' "$G/MANIFEST" >"$2/MANIFEST"
    else
        grep -v "^deb $1 " "$G/MANIFEST" >"$2/MANIFEST"
    fi
}

# 1. complete
if rehearse "$G" && grep -q "every C source preprocesses against the prefix" "$T/out/gpu_check.log"; then
    pass rehearsal_deps_complete
else fail rehearsal_deps_complete "$(cat "$T/last") $(tail -3 "$T/err")"; fi

# 2. each package's .deb removed
bad=
for pkg in $(awk '$1 == "package" {print $2}' "$G/MANIFEST"); do
    without "$pkg" "$T/g" || { bad="$bad $pkg(copy)"; continue; }
    if rehearse "$T/g"; then bad="$bad $pkg(passed)"
    elif ! grep -qF "missing dependency: Debian package $pkg " "$T/last"; then bad="$bad $pkg($(cut -c1-120 "$T/last"))"; fi
done
[ -z "$bad" ] && pass missing_each_package || fail missing_each_package "not named:$bad"

# 3. missed by the derivation: only the hiding and the probes can tell
bad=
for pair in libgfortran5:libgfortran.so.5 libpmix2:libpmix.so.2; do
    pkg=${pair%%:*} lib=${pair#*:}
    without "$pkg" "$T/g" all || { bad="$bad $pkg(copy)"; continue; }
    if rehearse "$T/g" GPU_CHECK_SKIP_STALE=1; then bad="$bad $pkg(passed)"
    elif ! grep -q "missing dependency\|does not start" "$T/last" || ! grep -qF -- "$lib" "$T/last"; then
        bad="$bad $pkg($(cut -c1-160 "$T/last"))"
    fi
    echo "# $pkg missed: $(cut -c1-200 "$T/last")"
done
[ -z "$bad" ] && pass missed_by_derivation || fail missed_by_derivation "$bad"

# 4. stale: the build needs what MANIFEST lacks
mkdir -p "$T/s" && cp -l "$G"/*.deb "$T/s/" && grep -v '^need header cjson/cJSON.h ' "$G/MANIFEST" >"$T/s/MANIFEST"
if ! rehearse "$T/s" && grep -q "stale .*needs header cjson/cJSON.h" "$T/err"; then pass stale_gpudeps_refused
else fail stale_gpudeps_refused "$(tail -1 "$T/err")"; fi
