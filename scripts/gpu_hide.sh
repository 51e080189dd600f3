# gpu_hide.sh: the rehearsal's hiding (scripts/gpu_check.sh --rehearse), sourced: inside a private
# mount namespace, every file of every package that .gpudeps packs for the GPU machine (MANIFEST
# class packed: OpenBLAS, cJSON, libmicrohttpd, the PCRE2 and zlib headers, Open MPI and what it
# loads, make, ...) disappears from this machine, so the build and every phase can find them only
# in the prefix, as on the GPU machine. The files are removed from view, not emptied: each is a
# whiteout in a read-only overlay mounted over its top folder (/usr, /etc), so a header is "No
# such file" to the compiler and a library "cannot open shared object file" to the loader.
# Base packages (class base, e.g. zlib1g and libpcre2-8-0, which this machine's grep, cp and gcc
# load) stay visible: the GPU machine is expected to have them, and where its loader does not,
# the prefix serves them (scripts/gpu_prefix.sh).
#   hide_list MANIFEST...   the files to hide (dpkg's lists, /usr form), on stdout
#   hide_apply LIST WORK    hides them (root, in the namespace); 1 with HIDE_ERROR set if any stays

hide_list() {
    local pkgs p f l top
    # class per package: a package line's class; a need's package without one is packed
    pkgs=$(awk '$1 == "package" {cls[$2] = $5} $1 == "need" {p = ($2 == "file" ? $4 : $2 == "data" ? $3 : $5); if (!(p in cls)) cls[p] = "packed"}
        END {for (p in cls) if (cls[p] != "base") print p}' "$@" | sort -u)
    for p in $pkgs; do
        for l in "/var/lib/dpkg/info/$p.list" "/var/lib/dpkg/info/$p:amd64.list"; do
            [ -f "$l" ] || continue
            while IFS= read -r f; do
                [ -d "$f" ] && continue # folders (and links to them, such as a merged /lib) stay
                [ -e "$f" ] || [ -L "$f" ] || continue
                case $f in /lib/* | /lib64/* | /bin/* | /sbin/*) top=${f#/} && [ -L "/${top%%/*}" ] && f=/usr$f ;; esac
                echo "$f"
            done <"$l"
        done
    done | sort -u
}

hide_apply() {
    local list=$1 wh=$2/whiteouts top left first
    HIDE_ERROR=
    python3 - "$list" "$wh" <<'EOF' || { HIDE_ERROR="cannot make the whiteouts under $wh"; return 1; }
import os, stat, sys
for p in open(sys.argv[1]).read().split("\n"):
    if p.startswith("/"):
        w = sys.argv[2] + p
        os.makedirs(os.path.dirname(w), exist_ok=True)
        os.mknod(w, stat.S_IFCHR | 0o600, os.makedev(0, 0))
EOF
    for top in $(cut -d/ -f2 "$list" | sort -u); do
        if [ -n "$(findmnt -rn -R -o TARGET "/$top" | tail -n +2)" ]; then
            HIDE_ERROR="cannot hide files under /$top: other file systems are mounted below it ($(findmnt -rn -R -o TARGET "/$top" | sed -n 2p))"
            return 1
        fi
        mount -t overlay overlay -o "lowerdir=$wh/$top:/$top" "/$top" 2>"$2/mount.err" ||
            { HIDE_ERROR="cannot hide files under /$top: overlay mount failed: $(head -1 "$2/mount.err")"; return 1; }
    done
    left=0 first=
    while IFS= read -r f; do
        if [ -e "$f" ] || [ -L "$f" ]; then left=$((left + 1)); [ -n "$first" ] || first=$f; fi
    done <"$list"
    [ $left -eq 0 ] || { HIDE_ERROR="$left files stayed visible after hiding (first: $first)"; return 1; }
}
