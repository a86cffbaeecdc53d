#!/usr/bin/env bash
# Runs Meridian's tests on a fresh Debian machine with Rust installed:
# installs what the tests need (OpenLDAP's client tools and slapd, and
# chromium with chromium-driver for the console's pages, from Debian;
# Python ldap3, pytest and Selenium from PyPI; the UnboundID LDAP SDK
# from Maven Central), builds, then runs the Rust unit, property, differential
# and integration tests and the Python client tests.
#
#   scripts/test.sh          the everyday tier, under 10 minutes on 2 cores
#                            once the dependencies are built:
#                            every crate's tests, and the integration tests
#                            that start the real binary and drive it with
#                            real clients (OpenLDAP's tools, ldap3, slapd as
#                            the reference), but not those below
#   scripts/test.sh --full   everything (what CI runs): also the cluster
#                            tests (several processes, leader kills, wiped
#                            and full disks), SIGKILL under load, the seed
#                            datasets at size and the bench toolkit's runs
set -euo pipefail
cd "$(dirname "$0")/.."

tier=fast
case "${1:-}" in
    --full) tier=full ;;
    "" | --fast) ;;
    *)
        echo "usage: scripts/test.sh [--fast | --full]" >&2
        exit 2
        ;;
esac
# The integration tests (crates/meridian/tests) only the full tier runs.
FULL_ONLY=" t32_sigkill t36_cluster t37_cluster_membership t38_cluster_reads t39_cluster_full_disk t90_seed_datasets t95_bench "

# OpenLDAP's client tools drive the integration tests; its server, slapd,
# is the reference the model is cross-checked against (the tests start
# their own slapd on a private 127.0.0.1 port).
missing=()
command -v ldapsearch >/dev/null && command -v ldapwhoami >/dev/null || missing+=(ldap-utils)
[ -x /usr/sbin/slapd ] && [ -e /etc/ldap/schema/core.schema ] || missing+=(slapd)
# `openssl passwd` makes {CRYPT} hashes for the password tests.
command -v openssl >/dev/null || missing+=(openssl)
# The console's pages are tested in a real browser, driven headless.
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# shellcheck source=scripts/install-packages.sh
source scripts/install-packages.sh
install_packages "${missing[@]}"

if ! python3 -c 'import ldap3, pytest, selenium' 2>/dev/null; then
    echo "== installing ldap3, pytest and selenium"
    python3 -m pip install -q 'ldap3==2.9.1' 'pytest>=7' 'selenium>=4.20' \
        || python3 -m pip install -q --break-system-packages 'ldap3==2.9.1' 'pytest>=7' 'selenium>=4.20'
fi

# The UnboundID LDAP SDK's command-line tools, a third-party client the TLS
# tests drive (a jar from Maven Central, run by Java; keytool makes their
# trust store). Fetched once into target/test-tools; a machine without
# Java or Maven gets them from Debian first.
UNBOUNDID_VERSION=7.0.3
UNBOUNDID_JAR="$PWD/target/test-tools/unboundid-ldapsdk-$UNBOUNDID_VERSION.jar"
if [ ! -f "$UNBOUNDID_JAR" ]; then
    if ! command -v java >/dev/null || ! command -v keytool >/dev/null || ! command -v mvn >/dev/null; then
        install_packages default-jre-headless maven
    fi
    echo "== fetching the UnboundID LDAP SDK $UNBOUNDID_VERSION"
    mkdir -p "$PWD/target/test-tools"
    # A registry that does not answer must not stop the other tests: the
    # TLS test that needs the jar says so in its output.
    mvn -q dependency:copy -Dartifact="com.unboundid:unboundid-ldapsdk:$UNBOUNDID_VERSION" \
        -DoutputDirectory="$PWD/target/test-tools" \
        || echo "WARNING: could not fetch the UnboundID LDAP SDK; its TLS test will not run"
fi
export MERIDIAN_UNBOUNDID_JAR="$UNBOUNDID_JAR"

echo "== cargo test ($tier tier)"
cargo build --locked --bins
if [ "$tier" = full ]; then
    cargo test --locked --workspace
else
    cargo test --locked --workspace --exclude meridian
    everyday=()
    for file in crates/meridian/tests/t*.rs; do
        name=$(basename "$file" .rs)
        case "$FULL_ONLY" in
            *" $name "*) ;;
            *) everyday+=(--test "$name") ;;
        esac
    done
    cargo test --locked -p meridian --bins "${everyday[@]}"
    echo "== not run in this tier (scripts/test.sh --full runs them):$FULL_ONLY"
fi

echo "== python client tests"
MERIDIAN_BIN="$PWD/target/debug/meridian" python3 -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/python
