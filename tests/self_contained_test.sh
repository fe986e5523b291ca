#!/usr/bin/env bash
# The repository works on its own: no tracked file reads or links anything
# beside the clone, and every relative link of its Markdown files names a file
# in the repository. The exceptions are the engine integration
# tests, which may use the engine's sources in shared/engine beside the clone:
# only those files (tests/engine_colibri_test.py, tests/engine_colibri_gateway_test.py) may name them.
# usage: self_contained_test.sh SOURCE_DIR   (a git work tree)
set -euo pipefail
cd "$1"
root=$(git rev-parse --show-toplevel)
cd "$root"
status=0

# 1. Paths that leave the clone: the parent folder's shared/ (by relative or
# absolute path), or a CMake source/binary dir followed by "/..".
# The patterns are bracketed so that this file does not match itself.
refs=$(git grep -n -I -E '[.][.]/shared|/work/share[d]|_DIR[}]/[.][.]' -- . |
       grep -v -E '^tests/engine_colibri(_gateway)?_test[.]py:' || true)
if [ -n "$refs" ]; then
  echo "tracked files refer to paths outside the repository:"
  echo "$refs"
  status=1
fi

# 2. Relative Markdown links must name files inside the repository.
while IFS= read -r md; do
  dir=$(dirname "$md")
  while IFS= read -r target; do
    case "$target" in http://* | https://* | mailto:* | '#'*) continue ;; esac
    path=${target%%#*}
    resolved=$(realpath -m "$dir/$path")
    case "$resolved/" in
      "$root"/*) [ -e "$resolved" ] || { echo "$md: link to a missing file: $target"; status=1; } ;;
      *) echo "$md: link outside the repository: $target"; status=1 ;;
    esac
  done < <(grep -o -E '\]\([^) ]+\)' "$md" | sed -E 's/^\]\((.*)\)$/\1/')
done < <(git ls-files '*.md')

[ "$status" -eq 0 ] && echo "ok: $(git ls-files | wc -l) tracked files refer to nothing outside the repository"
exit "$status"
