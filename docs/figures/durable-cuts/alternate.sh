#!/bin/sh
# Fresh runs of `sweepq bench durable --quick`,
# alternating 'before' (the five interpreted files issue 31's cuts changed, checked out from
# BASE for the run) with 'after' (this tree's), and one line a run from its run files.
# Usage, from the repository's root (it puts the files back at the end):
#   sh docs/figures/durable-cuts/alternate.sh BASE ROUNDS OUT > docs/figures/durable-cuts/alternating.txt
set -e
BASE=$1 ROUNDS=$2 OUT=$3
FILES="blobstore/rocks.py blobstore/group.py blobstore/changes.py blobstore/store.py engine/durable/journal.py"
SAVE=$(mktemp -d)
for f in $FILES; do cp "$f" "$SAVE/$(echo "$f" | tr / _)"; done
trap 'for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; rm -rf "$SAVE"' EXIT
echo "# sh docs/figures/durable-cuts/alternate.sh $BASE $ROUNDS $OUT: 'before' = $FILES of $BASE, 'after' = those of $(git rev-parse --short HEAD); each run sweepq bench durable --quick; each row's put+get rate, and sweepq's ratio to the faster SQLiteQueue (OFF or NORMAL) of the same run (paired median); load at its start"
for r in $(seq "$ROUNDS"); do
  for side in before after; do
    if [ "$side" = before ]; then for f in $FILES; do git show "$BASE:$f" > "$f"; done
    else for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; fi
    .venv/bin/sweepq bench durable --quick --out "$OUT/$side-$r" > /dev/null 2>&1
    md="$OUT/$side-$r/durable.md"
    rate() { awk -F'|' -v pat="$1" 'index($3, pat) {print $4; exit}' "$md" | cut -d' ' -f2-3; }  # by the row's "what"
    ratio=$(grep '^| durable | .*sweepq sync="os"' "$md" | cut -d'|' -f5 | grep -o '[0-9.]* x SQLiteQueue, synchronous=[A-Z]*')
    load=$(grep -o 'load average [0-9. ]* at the start' "$OUT/$side-$r/run.md" | cut -d' ' -f3-5)
    printf '%-6s %d: sweepq os %-9s store alone %-9s kv floor %-9s SQLiteQueue OFF %-9s NORMAL %-9s; sweepq os %s; load %s\n' \
      "$side" "$r" "$(rate 'sweepq sync="os"')" "$(rate 'store alone')" "$(rate 'no store layers')" \
      "$(rate 'SQLiteQueue, synchronous=OFF')" "$(rate 'SQLiteQueue, synchronous=NORMAL')" "$ratio" "$load"
  done
done
