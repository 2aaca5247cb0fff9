#!/bin/sh
# The clients bench's rows of one client and of 64 with net/server.py of BASE (every plain
# connection to the loop) and of this checkout (a connection admitted alone on a thread of its
# own, handed to the loop once others are open), alternating, each a fresh `sweepq bench
# clients` (its server a fresh `sweepq serve`).
# Usage: sh docs/figures/lone58/alternate.sh BASE ROUNDS OUTDIR > docs/figures/lone58/alternating.txt
set -e
base=$1; rounds=$2; out=$3
mkdir -p "$out"
cp net/server.py "$out/server.after.py"
git show "$base:net/server.py" > "$out/server.before.py"
echo "# sh docs/figures/lone58/alternate.sh $base $rounds $out: 'before' = net/server.py of $base, 'after' = that of $(git rev-parse --short HEAD); each a sweepq bench clients; $(date -u '+%Y-%m-%d %H:%M UTC')"
trap 'cp "$out/server.after.py" net/server.py' EXIT
for r in $(seq "$rounds"); do
  for form in before after; do
    cp "$out/server.$form.py" net/server.py
    .venv/bin/sweepq bench clients --out "$out/$form$r" > /dev/null 2>&1
    rows=$(grep -E "B: sweepq client \(unix socket\) \||B: redis-py \(unix socket\) \||CPU per request|64 concurrent" "$out/$form$r/clients.md" | cut -d'|' -f3-5 | sed 's/put+get pairs, 1024 B: //; s/  */ /g' | tr '\n' ';')
    echo "$form $r:$rows load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
