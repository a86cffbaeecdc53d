#!/usr/bin/env bash
# Installs Debian packages (as root, or through sudo) without starting
# the daemons they bring: Debian starts slapd when it installs it, and
# the tests and benchmarks start their own. Sourced or run:
#   scripts/install-packages.sh slapd ldap-utils
set -euo pipefail

install_packages() {
    [ "$#" -gt 0 ] || return 0
    local as_root=()
    [ "$(id -u)" -eq 0 ] || as_root=(sudo)
    echo "== installing $*"
    # policy-rc.d tells invoke-rc.d not to start them (only if we
    # created it).
    local created_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | "${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null
        "${as_root[@]}" chmod 755 /usr/sbin/policy-rc.d
        created_policy=1
    fi
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    if [ -n "$created_policy" ]; then "${as_root[@]}" rm -f /usr/sbin/policy-rc.d; fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    install_packages "$@"
fi
