# gpu_prefix.sh: the device check's dependency phase, sourced by scripts/gpu_check.sh. It turns
# .gpudeps (made by scripts/gpu_deps.sh: Debian packages and MANIFEST, what the build needs of
# them, derived from the build by scripts/gpu_needs.py) into a private prefix, never touching /,
# and proves it complete before anything is built, stopping at the first missing dependency with
# one line that names it (DEPS_ERROR):
#   1. every package of MANIFEST has its .deb;              unpacked with dpkg -x (or ar + tar)
#   2. every need of MANIFEST (header, link input, file, soname, tool, data) is in the prefix
#   3. the prefix is laid out for use: PREFIX/lib holds a link per soname (LD_LIBRARY_PATH), but a
#      base library (MANIFEST class base: zlib, PCRE2, ...) is left to the machine's own copy when
#      its loader has that soname; PREFIX/bin holds mpicc (gcc with the include and library
#      directories of the needs, relocated), mpirun, and make where the machine has none; Open
#      MPI is relocated (OPAL_PREFIX, OPAL_SYSCONFDIR, the component paths)
#   4. probes: the link line links and its program loads (make link-inputs LINK_RUN=1), Open MPI
#      starts one rank (mpirun -np 1 of an MPI_Init/MPI_Finalize program), every C source
#      preprocesses (make CUDA=0 build-headers)
# Usage: prefix_setup GPUDEPS_DIR PREFIX (from the repository root); 0 and the environment
# exported, or 1 with DEPS_ERROR set. Progress goes to stdout. prefix_packages GPUDEPS_DIR: step 1.

prefix_fail() { DEPS_ERROR=$1; echo "$1"; return 1; }

prefix_unpack() { # DEB ROOT
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$1" "$2"
    else
        local d; d=$(mktemp -d) || return 1
        (cd "$d" && ar x "$1" && tar -xf data.tar.* -C "$2"); local rc=$?
        rm -rf "$d"; return $rc
    fi
}

# prefix_packages GPUDEPS_DIR: step 1 alone (the rehearsal runs it before it hides anything)
prefix_packages() {
    local G=$1 M=$1/MANIFEST pkg f what
    DEPS_ERROR=
    [ -s "$M" ] || { prefix_fail "no $M: run bash scripts/gpu_deps.sh on the build machine and carry .gpudeps"; return 1; }
    while read -r pkg f; do # each package with its .deb ("-": MANIFEST names none)
        if [ "$f" = - ] || [ ! -s "$G/$f" ]; then
            what=$(awk -v p="$pkg" '$1 == "need" && ($2 == "file" ? $4 : $2 == "data" ? $3 : $5) == p {print $2 " " $3; exit}' "$M")
            prefix_fail "missing dependency: Debian package $pkg${what:+ (for $what)} is not in ${G##*/}: run bash scripts/gpu_deps.sh on the build machine and carry .gpudeps"
            return 1
        fi
    done < <(awk 'NR == FNR {if ($1 == "deb") deb[$2] = $3; next} $1 == "package" {print $2, ($2 in deb ? deb[$2] : "-")}' "$M" "$M")
}

prefix_setup() {
    local G=$1 M=$1/MANIFEST rec kind a b c d f pkg path what
    P=$2 R=$2/root
    L=$R/usr/lib/x86_64-linux-gnu
    case $G in /*) ;; *) G=$PWD/$G ;; esac
    # 1. the packages
    prefix_packages "$G" || return 1
    rm -rf "$P" && mkdir -p "$R" "$P/bin" "$P/lib" || { prefix_fail "cannot create $P"; return 1; }
    for f in $(awk '$1 == "deb" {print $3}' "$M"); do
        prefix_unpack "$G/$f" "$R" || { prefix_fail "cannot unpack $G/$f (a damaged download? run bash scripts/gpu_deps.sh again)"; return 1; }
    done
    # the packages' paths are those of a merged /usr (/lib -> usr/lib), as MANIFEST writes them
    for d in lib lib64 bin sbin; do
        if [ -d "$R/$d" ] && [ ! -L "$R/$d" ]; then
            mkdir -p "$R/usr/$d" && cp -a "$R/$d/." "$R/usr/$d/" && rm -rf "${R:?}/$d"
        fi
        [ -e "$R/$d" ] || ln -s "usr/$d" "$R/$d"
    done
    # absolute symlinks (zlib1g-dev's libz.so -> /lib/...) point into the prefix, never at the machine
    find "$R" -type l -lname '/*' | while read -r f; do ln -sfn "$R$(readlink "$f")" "$f"; done
    echo "unpacked $(grep -c '^deb ' "$M") packages into $R ($(du -sh "$R" | cut -f1))"

    # 2. every need, in MANIFEST's order
    local n=0
    while read -r rec kind a b c d; do
        [ "$rec" = need ] || continue
        case $kind in
            header) path=$b/$a pkg=$c what="header <$a>" ;;
            link) path=$b pkg=$c what="link input $a" ;;
            file) path=$a pkg=$b what="file ${a##*/}" ;;
            soname) path=$b pkg=$c what="library $a (needed by ${d##*/})" ;;
            tool) path=$b pkg=$c what="program $a" ;;
            data) path=$b pkg=$a what="data files of $a" ;;
            *) continue ;;
        esac
        if [ ! -e "$R$path" ]; then
            prefix_fail "missing dependency: $what ($path, Debian package $pkg) is not in ${G##*/}: run bash scripts/gpu_deps.sh on the build machine and carry .gpudeps"
            return 1
        fi
        n=$((n + 1))
    done <"$M"
    echo "all $n needs of the build are in the prefix"

    # 3. the layout: sonames, compiler wrapper, tools, Open MPI's relocation
    local cache mine=0 machine=0
    cache=$( (/sbin/ldconfig -p || ldconfig -p) 2>/dev/null)
    while read -r rec kind a b c d; do
        [ "$rec" = need ] && [ "$kind" = soname ] || continue
        if grep -q "^package $c .* base\$" "$M" && echo "$cache" | grep -q "^[[:space:]]*$a (.*x86-64"; then
            machine=$((machine + 1)); continue
        fi
        ln -sfn "$R$b" "$P/lib/$a" && mine=$((mine + 1))
    done <"$M"
    echo "sonames: $mine from the prefix ($P/lib), $machine base ones from this machine's own copies"
    local inc lib libs
    inc=$(awk '$1 == "need" && $2 == "header" && !seen[$4]++ {printf " -I'"$R"'%s", $4}' "$M")
    lib=$(awk '$1 == "need" && $2 == "link" {d = $4; sub(/\/[^\/]*$/, "", d); if (!seen[d]++) printf " -L'"$R"'%s", d}' "$M")
    libs=$(awk '$1 == "cc-libs" {$1 = ""; print}' "$M")
    cat >"$P/bin/mpicc" <<EOF
#!/bin/sh
# mpicc for the prefix (scripts/gpu_prefix.sh, from $M): gcc with the include and library
# directories of the build's needs; link flags only when linking
link="$lib -Wl,-rpath-link,$P/lib $libs"
for a in "\$@"; do case "\$a" in -c|-E|-S|-M|-MM) link= ;; esac; done
exec \${MYRIAD_HOST_CC:-gcc}$inc "\$@" \$link
EOF
    chmod +x "$P/bin/mpicc"
    path=$(awk '$1 == "need" && $2 == "tool" && $3 == "mpirun" {print $4}' "$M")
    [ -n "$path" ] && ln -sfn "$R$path" "$P/bin/mpirun" && ln -sfn "$R$path" "$P/bin/mpiexec"
    path=$(awk '$1 == "need" && $2 == "tool" && $3 == "make" {print $4}' "$M")
    if [ -n "$path" ] && ! command -v make >/dev/null; then
        ln -sfn "$R$path" "$P/bin/make" && echo "make: the prefix's (this machine has none)"
    fi
    export PATH="$P/bin:$PATH"
    export LD_LIBRARY_PATH="$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ -d "$R/usr/share/openmpi" ] && export OPAL_PREFIX=$R/usr
    [ -d "$R/etc/openmpi" ] && export OPAL_SYSCONFDIR=$R/etc/openmpi
    [ -d "$L/pmix2" ] && export PMIX_INSTALL_PREFIX=$L/pmix2
    [ -d "$L/openmpi/lib/openmpi3" ] && export OMPI_MCA_mca_base_component_path=$L/openmpi/lib/openmpi3
    [ -d "$L/pmix2/lib/pmix" ] && export PMIX_MCA_mca_base_component_path=$L/pmix2/lib/pmix
    export P R L

    # 4. probes: link, one MPI rank, every C source's headers
    local out
    if ! out=$(make -s link-inputs LINK_RUN=1 CC="$P/bin/mpicc" 2>&1 >/dev/null); then
        prefix_fail "missing dependency at link or load: $(echo "$out" | grep -m1 -E 'cannot find|not found|undefined|cannot open' || echo "$out" | tail -1)"
        return 1
    fi
    echo "the link line links against the prefix, and its program loads"
    if [ -n "$libs" ]; then
        d=$(mktemp -d)
        printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' >"$d/mpi_probe.c"
        if ! out=$("$P/bin/mpicc" "$d/mpi_probe.c" -o "$d/mpi_probe" 2>&1 &&
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun -np 1 "$d/mpi_probe" 2>&1); then
            rm -rf "$d"
            prefix_fail "Open MPI from the prefix does not start one rank: $(echo "$out" | grep -m1 -E 'cannot open shared|not found|error while loading' ||
                echo "$out" | grep -v -E '^[- ]*$' | head -1)"
            return 1
        fi
        rm -rf "$d"
        echo "mpirun -np 1 starts a rank from the prefix"
    fi
    if ! out=$(make -s CUDA=0 build-headers CC="$P/bin/mpicc" 2>&1 >/dev/null); then
        prefix_fail "missing dependency: $(echo "$out" | grep -m1 -E 'fatal error|No such file' || echo "$out" | tail -1)"
        return 1
    fi
    echo "every C source preprocesses against the prefix"
}
