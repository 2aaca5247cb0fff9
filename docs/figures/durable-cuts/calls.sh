#!/bin/sh
# Instructions per durable put+get (callgrind: they do not move with the load) of the journal
# and store layers of BASE ('before': the files issue 31's cut of the calls changed, checked
# out from BASE, and the compiled journal moved aside so that BASE's journal.py runs
# interpreted, as it did there) and of this tree ('after'), ROUNDS times in turn. From the
# repository's root, with the tree built (it puts everything back):
#   sh docs/figures/durable-cuts/calls.sh BASE N ROUNDS > docs/figures/durable-cuts/calls.txt
# The 'before' runs warn on stderr that the compiled modules were built from other sources
# (BASE's journal.py and compiled.py are in place): they are, and only the journal differs.
# A file of the list that BASE or this tree lacks is left out (engine/compiled.py went in
# a later change; the committed calls.txt ran with it).
set -e
BASE=$1 N=$2 ROUNDS=$3
FILES=""
for f in blobstore/access.py blobstore/changelog.py blobstore/faults.py blobstore/group.py blobstore/protocol.py blobstore/store.py engine/durable/journal.py engine/compiled.py; do
  if [ -e "$f" ] && git cat-file -e "$BASE:$f" 2>/dev/null; then FILES="$FILES $f"; fi
done
SO=$(ls engine/durable/journal.*.so)
SAVE=$(mktemp -d)
for f in $FILES; do cp "$f" "$SAVE/$(echo "$f" | tr / _)"; done
restore() { for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; [ -e "$SO" ] || mv "$SAVE/journal.so" "$SO"; }
trap 'restore; rm -rf "$SAVE"' EXIT
AFTER=$(git rev-parse --short HEAD)
for round in $(seq "$ROUNDS"); do
  for side in before after; do
    if [ "$side" = before ]; then
      for f in $FILES; do git show "$BASE:$f" > "$f"; done
      mv "$SO" "$SAVE/journal.so"
    else restore; fi
    echo "# $side, round $round: $FILES of $([ "$side" = before ] && echo "$BASE, journal interpreted" || echo "$AFTER, journal compiled"); .venv/bin/python -m sweepq.bench.instructions \"durable os\" \"durable os sqlite\" -n $N; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg) (counts do not move with it)"
    .venv/bin/python -m sweepq.bench.instructions "durable os" "durable os sqlite" -n "$N"
  done
done
