#!/usr/bin/env bash
# Install the pinned engines that the oracle job (pytest -m oracle) runs, each into its own
# virtual environment keyed by its version, so a pin change makes a new environment and an
# unchanged pin is reused. ~20 GB and 20-30 minutes the first time (CUDA wheels that are
# only imported; everything runs on the CPU).
#
#   bash tests/oracle/install_engines.sh            # both engines
#   bash tests/oracle/install_engines.sh vllm       # one
#
# The environments live in $CKPTDIFF_ORACLE_HOME (default ~/.cache/ckptdiff/oracle).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
home="${CKPTDIFF_ORACLE_HOME:-$HOME/.cache/ckptdiff/oracle}"
mkdir -p "$home"

# The pins: one line each, "<engine> <pip requirement...>". Also read by tests/oracle/engines.py.
pins_file="$here/pins.txt"

install_one() {
    local engine="$1"; shift
    local version="$1"; shift
    local env="$home/$engine-$version"
    if [ -f "$env/.complete" ]; then
        echo "oracle: $engine $version already installed in $env"
        return 0
    fi
    rm -rf "$env.partial"
    python3 -m venv "$env.partial"
    # The engines need their own torch (newer than the machine's cap file allows).
    PIP_CONSTRAINT="" PIP_CONFIG_FILE=/dev/null \
        "$env.partial/bin/python" -m pip install -q --upgrade pip
    PIP_CONSTRAINT="" PIP_CONFIG_FILE=/dev/null \
        "$env.partial/bin/python" -m pip install -q "$@"
    rm -rf "$env"
    mv "$env.partial" "$env"
    # venv scripts carry absolute paths; the interpreter path is what the job uses.
    touch "$env/.complete"
    echo "oracle: $engine $version installed in $env"
}

want="${*:-}"
while read -r engine version reqs; do
    case "$engine" in ''|'#'*) continue ;; esac
    if [ -n "$want" ] && [[ " $want " != *" $engine "* ]]; then continue; fi
    # shellcheck disable=SC2086
    install_one "$engine" "$version" $reqs
done < "$pins_file"
