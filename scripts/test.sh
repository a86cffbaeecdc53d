#!/usr/bin/env bash
# Runs every test of Meridian on a fresh Debian machine with Rust installed:
# installs what the tests need (OpenLDAP's client tools from Debian, Python
# ldap3 and pytest from PyPI), builds, then runs the Rust unit, property,
# differential and integration tests and the Python client tests.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v ldapsearch >/dev/null || ! command -v ldapwhoami >/dev/null; then
    echo "== installing ldap-utils"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ldap-utils
fi

if ! python3 -c 'import ldap3, pytest' 2>/dev/null; then
    echo "== installing ldap3 and pytest"
    python3 -m pip install -q 'ldap3==2.9.1' 'pytest>=7' \
        || python3 -m pip install -q --break-system-packages 'ldap3==2.9.1' 'pytest>=7'
fi

echo "== cargo test"
cargo build --locked --bins
cargo test --locked --workspace

echo "== python client tests"
MERIDIAN_BIN="$PWD/target/debug/meridian" python3 -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/python
