#!/usr/bin/env bash
# Reads changed paths (one a line) on stdin and prints the components they reach, space-separated: each
# component under src/<c>/ or tests/<c>/ that changed, and every component whose dependency closure (from
# LAYERING, the build's layering.cmake) holds one of them. A changed path outside src/ and tests/ (build
# files, scripts, tools) reaches every component; changed documentation reaches none.
set -euo pipefail
layering="$1"
[ -f "$layering" ] || { echo "quick_components: $layering not found (configure the build first)" >&2; exit 1; }
# set(DEEPINFER_CLOSURE_x "a;b") and set(DEEPINFER_PRESENT_COMPONENTS "a;b;...") lines.
all="$(sed -n 's/^set(DEEPINFER_PRESENT_COMPONENTS "\(.*\)")$/\1/p' "$layering" | tr ';' ' ')"
declare -A touched=()
while IFS= read -r path; do
  [ -n "$path" ] || continue
  case "$path" in
    *.md | docs/* | LICENSE*) ;;
    src/*/* | tests/*/*)
      c="${path#*/}"
      c="${c%%/*}"
      if [[ " $all " == *" $c "* ]]; then touched[$c]=1; else for a in $all; do touched[$a]=1; done; fi ;;
    *) for a in $all; do touched[$a]=1; done ;;
  esac
done
out=()
for c in $all; do
  if [ -n "${touched[$c]:-}" ]; then out+=("$c"); continue; fi
  closure="$(sed -n "s/^set(DEEPINFER_CLOSURE_$c \"\(.*\)\")\$/\1/p" "$layering" | tr ';' ' ')"
  for d in $closure; do
    if [ -n "${touched[$d]:-}" ]; then out+=("$c"); break; fi
  done
done
echo "${out[*]:-}"
