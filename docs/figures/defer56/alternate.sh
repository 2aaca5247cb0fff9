#!/bin/sh
# Fresh runs of `sweepq bench durable --quick`, alternating 'before' (a checkout of BASE with its
# compiled modules built in place, on PYTHONPATH as BASEPKG/sweepq) with 'after' (the installed
# tree), one line a run from its run files: each contender's put+get rate, and sweepq's ratio to
# SQLiteQueue OFF of the same run (paired median).
# Usage, from the repository's root:
#   sh docs/figures/defer56/alternate.sh BASE BASEPKG ROUNDS OUT > docs/figures/defer56/alternating.txt
set -e
BASE=$1 BASEPKG=$2 ROUNDS=$3 OUT=$4
echo "# sh docs/figures/defer56/alternate.sh $BASE $BASEPKG $ROUNDS $OUT: 'before' = $BASE, 'after' = $(git rev-parse --short HEAD); each run sweepq bench durable --quick in a fresh process from $OUT; load at its start"
for r in $(seq "$ROUNDS"); do
  for side in before after; do
    if [ "$side" = before ]; then pp=$BASEPKG; else pp=; fi
    (cd "$OUT" && PYTHONPATH=$pp "$OLDPWD/.venv/bin/python" -m sweepq bench durable --quick --durable-dir "$OUT/dd-$side-$r" --create-durable-dir --out "$OUT/$side-$r" > /dev/null 2>&1)
    md="$OUT/$side-$r/durable.md"
    rate() { awk -F'|' -v pat="$1" 'index($3, pat) {print $4; exit}' "$md" | cut -d' ' -f2-3; }  # by the row's "what"
    ratio=$(grep '^| durable | .*sweepq sync="os"' "$md" | cut -d'|' -f5 | grep -o '[0-9.]* x SQLiteQueue, synchronous=OFF')
    load=$(grep -o 'load average [0-9. ]* at the start' "$OUT/$side-$r/run.md" | cut -d' ' -f3-5)
    printf '%-6s %d: sweepq os %-9s RocksDB+change-log floor %-9s SQLiteQueue OFF %-9s; sweepq os %s; load %s\n' \
      "$side" "$r" "$(rate 'sweepq sync="os"')" "$(rate 'a RocksDB log write')" \
      "$(rate 'SQLiteQueue, synchronous=OFF')" "$ratio" "$load"
  done
done
