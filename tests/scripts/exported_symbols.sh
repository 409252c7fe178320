#!/bin/sh
# The shared library exports the public API and nothing else: every defined
# dynamic symbol of libsmelt.so is a smelt_* function declared SMELT_API in
# include/smelt.h, and every such function is exported.
#   exported_symbols.sh LIBSMELT_SO SMELT_H
set -u
lib=$1 header=$2
command -v nm >/dev/null 2>&1 || { echo "nm not found: skipped"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" > "$tmp/nm" || { echo "nm failed on $lib"; exit 1; }
awk 'NF >= 3 { print $3 }' "$tmp/nm" | sort -u > "$tmp/exported"
grep -o '^SMELT_API[^(]*(' "$header" | sed 's/ *($//; s/.*[ *]//' | sort -u > "$tmp/declared"
status=0
if [ ! -s "$tmp/declared" ]; then echo "no SMELT_API declarations found in $header"; exit 1; fi
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
  echo "$lib exports $(echo "$extra" | wc -l) symbols that are not in the public API (SMELT_API in $header):"
  echo "$extra" | head -40
  status=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$missing" ]; then
  echo "declared SMELT_API in $header but not exported by $lib:"
  echo "$missing"
  status=1
fi
[ $status = 0 ] && echo "$lib exports exactly the $(wc -l < "$tmp/declared") public functions"
exit $status
