#!/usr/bin/env bash
# The main job on built-in defaults: build the default image, make a sample
# project, let a scripted "agent" change it inside a session, show the
# diff, accept part of it, and show the project. Run by `make demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${AIRLOCK:-$PWD/bin/airlock}
DEMO=${AIRLOCK_DEMO_DIR:-/tmp/airlock-demo}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Build the default image (cached after the first time)"
"$A" image build

step "A sample project in $DEMO/project (a git repository, all committed)"
rm -rf "$DEMO" && mkdir -p "$DEMO/project"
cd "$DEMO/project"
cat > calc.py <<'PY'
def add(a, b):
    return a + b


def div(a, b):
    return a / b
PY
cat > README.md <<'MD'
# calc
A tiny calculator.
MD
printf 'scratch notes\n' > NOTES.txt
git init -q && git add -A && git -c user.name=demo -c user.email=demo@example.com commit -qm "calc"
ls -la

step "A scripted agent works in a session (the project stays untouched)"
set +e
"$A" run --project "$DEMO/project" -e PYTHONDONTWRITEBYTECODE=1 -- bash -c '
set -e
echo "agent: guarding div against zero, adding tests, dropping the notes"
python3 - <<PY
import re
src = open("calc.py").read()
src = src.replace("def div(a, b):\n    return a / b", "def div(a, b):\n    if b == 0:\n        raise ValueError(\"division by zero\")\n    return a / b")
open("calc.py", "w").write(src)
PY
mkdir -p tests && touch tests/__init__.py
cat > tests/test_calc.py <<PY
import unittest
from calc import add, div


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_div_by_zero(self):
        with self.assertRaises(ValueError):
            div(1, 0)


if __name__ == "__main__":
    unittest.main()
PY
rm NOTES.txt
echo "- usage: python3 -m unittest" >> README.md
python3 -m unittest discover -s tests -t . 2>&1 | tail -3
' 2> "$DEMO/run.err"
code=$?
set -e
cat "$DEMO/run.err" >&2
[ "$code" -eq 0 ] || { echo "the scripted agent failed (exit $code)"; exit "$code"; }
ID=$(grep -o 'session [0-9a-f]\{12\}' "$DEMO/run.err" | head -1 | cut -d' ' -f2)

step "The project on disk is unchanged: git status"
git status --short; echo "(clean)"

step "airlock diff $ID --stat"
"$A" diff "$ID" --stat

step "airlock diff $ID"
"$A" diff "$ID" --color always

step "Accept the code and its tests, not the README edit or the deletion"
"$A" accept "$ID" calc.py tests

step "The project now: git status and the tests"
git status --short
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests -t . 2>&1 | tail -2 || true

step "What is still in the session, waiting for review"
"$A" diff "$ID" --stat
cat <<TXT

Next: \`$A accept $ID README.md\`, \`$A discard $ID\`, \`$A shell $ID\`, \`$A logs $ID\`, \`$A rm $ID\`.
Or review it in the interface: \`$A ui\` opens it in a browser (the desktop app: \`make desktop\`).
TXT
