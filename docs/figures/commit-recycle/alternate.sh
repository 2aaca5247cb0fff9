#!/bin/sh
# Fresh runs of `sweepq bench durable --quick` with the power-safe rounds made longer,
# alternating 'before' (the four files issue 31's recycled log and preallocated change log
# changed, checked out from BASE for the run) with 'after' (this tree's), and one line a
# run from its run files: the power-safe rows (one producer, a put and a get one fsync each).
# Run in a checkout of 30061b3, where 'after' was tried (not kept on main: docs/durable-bench.md).
# Usage, from the repository's root (it puts the files back at the end):
#   sh docs/figures/commit-recycle/alternate.sh BASE ROUNDS SYNC_MESSAGES OUT > docs/figures/commit-recycle/FILE.txt
set -e
BASE=$1 ROUNDS=$2 N=$3 OUT=$4
FILES="blobstore/files.py blobstore/rocks.py blobstore/rocksfiles.py blobstore/guard.py"
SAVE=$(mktemp -d)
for f in $FILES; do cp "$f" "$SAVE/$(echo "$f" | tr / _)"; done
trap 'for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; rm -rf "$SAVE"' EXIT
echo "# sh docs/figures/commit-recycle/alternate.sh $BASE $ROUNDS $N $OUT: 'before' = $FILES of $BASE, 'after' = those of $(git rev-parse --short HEAD); each run sweepq bench durable --quick --durable-sync-messages $N (power-safe: $((N / 6)) puts then gets a round, 12 rounds); the fsync floor's and sweepq sync=\"commit\"'s synced ops/s (best round), sweepq's ratio to the floor (paired median; all rounds), 1 producer's persistent puts; load at its start"
for r in $(seq "$ROUNDS"); do
  for side in before after; do
    if [ "$side" = before ]; then for f in $FILES; do git show "$BASE:$f" > "$f"; done
    else for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; fi
    .venv/bin/sweepq bench durable --quick --durable-sync-messages "$N" --out "$OUT/$side-$r" > /dev/null 2>&1
    md="$OUT/$side-$r/durable.md"
    row() { grep -F "$1" "$md" | head -1; }
    floor=$(row 'power-safe (a put and a get: one fsync each): fsync floor' | cut -d'|' -f4 | cut -d' ' -f2-3)
    mine=$(row 'power-safe (a put and a get: one fsync each): sweepq sync="commit"' | cut -d'|' -f4 | cut -d' ' -f2-3)
    ratio=$(row 'power-safe (a put and a get: one fsync each): sweepq sync="commit"' | cut -d'|' -f5 | grep -o '^ [0-9.]* x floor\|all rounds [0-9.]* x' | tr '\n' ' ')
    one=$(row 'persistent put outside syncpoint: 1 producer thread' | cut -d'|' -f4 | cut -d' ' -f2-3)
    load=$(grep -o 'load average [0-9. ]* at the start' "$OUT/$side-$r/run.md" | cut -d' ' -f3-5)
    printf '%-6s %d: floor %-9s sweepq commit %-9s %s; 1 producer put %-9s; load %s\n' "$side" "$r" "$floor" "$mine" "$ratio" "$one" "$load"
  done
done
