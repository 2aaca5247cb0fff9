#!/bin/sh
# Instructions per put+get of the durable scenarios (callgrind: they do not move with the load),
# 'before' (the five interpreted files issue 31's cuts changed, checked out from BASE for the
# run) then 'after' (this tree's). From the repository's root (it puts the files back):
#   sh docs/figures/durable-cuts/instructions.sh BASE N > docs/figures/durable-cuts/instructions.txt
set -e
BASE=$1 N=$2
FILES="blobstore/rocks.py blobstore/group.py blobstore/changes.py blobstore/store.py engine/durable/journal.py"
SAVE=$(mktemp -d)
for f in $FILES; do cp "$f" "$SAVE/$(echo "$f" | tr / _)"; done
trap 'for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; rm -rf "$SAVE"' EXIT
for side in before after; do
  if [ "$side" = before ]; then for f in $FILES; do git show "$BASE:$f" > "$f"; done
  else for f in $FILES; do cp "$SAVE/$(echo "$f" | tr / _)" "$f"; done; fi
  echo "# $side: $FILES of $([ "$side" = before ] && echo "$BASE" || git rev-parse --short HEAD); .venv/bin/python -m sweepq.bench.instructions \"durable os\" \"durable store\" \"durable os sqlite\" -n $N; load $(cut -d' ' -f1-3 /proc/loadavg) (counts do not move with it)"
  .venv/bin/python -m sweepq.bench.instructions "durable os" "durable store" "durable os sqlite" -n "$N"
done
