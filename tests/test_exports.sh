#!/bin/sh
# test_exports.sh LIB SYMBOLS_H: libuvmchunk.so exports exactly the table of interpose/symbols.h:
# every driver name unversioned (libcuda has no symbol versions), every runtime name twice, as
# name@@libcudart.so.13 (the default) and name@libcudart.so.12, so each caller's reference reaches
# the wrapper of the runtime it was linked against; nothing else.
lib=$1 table=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sed -n '/#define UVMC_INTERPOSED(X)/,/^$/p' "$table" | grep -o 'X([A-Za-z0-9_]*, [A-Za-z0-9_]*, [A-Z]*)' |
    sed 's/X(\([^,]*\), [^,]*, \([A-Z]*\))/\1 \2/' > "$tmp/table"
while read -r name lib_kind; do
    if [ "$lib_kind" = RUNTIME ]; then
        printf '%s@@libcudart.so.13\n%s@libcudart.so.12\n' "$name" "$name"
    else
        printf '%s\n' "$name"
    fi
done < "$tmp/table" | sort > "$tmp/want"
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sort > "$tmp/have"
missing=$(comm -23 "$tmp/want" "$tmp/have")
extra=$(comm -13 "$tmp/want" "$tmp/have")
n=$(wc -l < "$tmp/want")
if [ -z "$missing" ] && [ -z "$extra" ] && [ "$n" -gt 0 ]; then
    echo "exports: the $n of symbols.h, versioned as they should be"
    echo "1 passed, 0 failed"
    exit 0
fi
[ -n "$missing" ] && echo "FAIL: not exported: $missing"
[ -n "$extra" ] && echo "FAIL: exported beyond symbols.h: $extra"
echo "0 passed, 1 failed"
exit 1
