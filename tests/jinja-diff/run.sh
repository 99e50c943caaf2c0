#!/bin/sh
# Differential test of our Jinja renderer against Python Jinja2 (see run.py). Exit 77 = skipped.
# The first python3 that has Jinja2 runs it (a user's python3 may lack it where the
# distribution's, which .ci/run installs python3-jinja2 for, has it).
here=$(dirname "$0")
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import jinja2' >/dev/null 2>&1; then
        if [ -n "${SPLASH_BUILD:-}" ] && [ -z "${SPLASH:-}" ]; then
            SPLASH="$SPLASH_BUILD/splash"
            export SPLASH
        fi
        exec "$py" "$here/run.py" "$@"
    fi
done
echo "jinja-diff: SKIP: no python3 with Jinja2 (apt install python3-jinja2)"
exit 77
