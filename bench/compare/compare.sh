#!/usr/bin/env bash
# Side by side with OpenLDAP's slapd, through a third-party client: the
# UnboundID LDAP SDK's SearchRate, ModRate, SearchAndModRate and AuthRate,
# and `meridian bench`. Both servers hold the same users (objectClass and
# uid indexed on both, slapd 2.5 back-mdb with default durability,
# Meridian in its default configuration); each workload runs against
# slapd, Meridian, slapd, Meridian, and the table gives both runs of each.
#
#   bench/compare/compare.sh            # full: 1,000,000 users, 30 s a run
#   bench/compare/compare.sh --smoke    # 2,000 users, 2 s a run (a minute)
#   ENTRIES=200000 SECONDS_PER_RUN=10 INTERVALS=1 bench/compare/compare.sh
#   MERIDIAN_BIN=target/debug/meridian bench/compare/compare.sh --smoke
#   bench/compare/compare.sh --update-docs  # also puts the table at the
#                                           # top of docs/BENCHMARKS.md
#
# On a fresh Debian machine it installs what it needs (slapd, ldap-utils,
# a Java runtime, Maven) and fetches the SDK's jar from Maven Central into
# target/test-tools (where scripts/test.sh keeps it too). Servers listen
# on 127.0.0.1 and are stopped at the end. The table is written to
# target/compare/RESULTS.md, with the seed scenarios of bench/scenarios
# below the table (each on its own data, by scripts/bench-seed.py; the
# smoke mode runs one small one). A run that measures nothing (a client error)
# fails the script: the smoke mode checks the comparison works, in CI.
set -euo pipefail
cd "$(dirname "$0")/../.."

ENTRIES=${ENTRIES:-1000000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-30}
INTERVALS=${INTERVALS:-2}
COMMAND_LINE="$0 $*"
UPDATE_DOCS=false
for arg in "$@"; do
    case $arg in
        --smoke)
            ENTRIES=2000
            SECONDS_PER_RUN=1
            INTERVALS=1
            ;;
        --update-docs) UPDATE_DOCS=true ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done
SDK_VERSION=7.0.3
WORK=$PWD/target/compare
SLAPD_PORT=${SLAPD_PORT:-3901}
MERIDIAN_PORT=${MERIDIAN_PORT:-3902}
mkdir -p "$WORK"

need_packages=()
[ -x /usr/sbin/slapd ] || need_packages+=(slapd)
command -v ldapsearch >/dev/null || need_packages+=(ldap-utils)
command -v java >/dev/null || need_packages+=(default-jre-headless)
command -v mvn >/dev/null || need_packages+=(maven)
# shellcheck source=scripts/install-packages.sh
source scripts/install-packages.sh
install_packages "${need_packages[@]}"
JAR=$PWD/target/test-tools/unboundid-ldapsdk-$SDK_VERSION.jar
if [ ! -s "$JAR" ]; then
    echo "== fetching the UnboundID LDAP SDK $SDK_VERSION"
    mkdir -p "$PWD/target/test-tools"
    mvn -q dependency:copy -Dartifact="com.unboundid:unboundid-ldapsdk:$SDK_VERSION" \
        -DoutputDirectory="$PWD/target/test-tools"
fi

if [ -n "${MERIDIAN_BIN:-}" ]; then
    MERIDIAN=$(realpath "$MERIDIAN_BIN")
else
    echo "== building meridian (release)"
    cargo build -q --release -p meridian
    MERIDIAN=$PWD/target/release/meridian
fi

echo "== $ENTRIES users"
python3 bench/compare/gen_users.py "$ENTRIES" > "$WORK/users.ldif"
SCHEMA=/etc/ldap/schema
rm -rf "$WORK/slapd" "$WORK/meridian"
mkdir -p "$WORK/slapd/db" "$WORK/meridian"
cat > "$WORK/slapd/slapd.conf" <<CONF
include $SCHEMA/core.schema
include $SCHEMA/cosine.schema
include $SCHEMA/inetorgperson.schema
include $SCHEMA/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile $WORK/slapd/slapd.pid
database mdb
suffix "dc=example,dc=com"
rootdn "cn=admin,dc=example,dc=com"
rootpw secret
directory $WORK/slapd/db
maxsize 17179869184
index objectClass eq
index uid eq
CONF
cat > "$WORK/meridian/meridian.toml" <<CONF
[storage.indexes]
objectClass = ["eq"]
uid = ["eq"]
CONF
t0=$(date +%s.%N)
/usr/sbin/slapadd -q -f "$WORK/slapd/slapd.conf" -l "$WORK/users.ldif"
t1=$(date +%s.%N)
"$MERIDIAN" import --config "$WORK/meridian/meridian.toml" --data-dir "$WORK/meridian/data" \
    -i "$WORK/users.ldif" >/dev/null
t2=$(date +%s.%N)
load_slapd=$(python3 -c "print(f'{$t1-$t0:.1f} s')")
load_meridian=$(python3 -c "print(f'{$t2-$t1:.1f} s')")

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
/usr/sbin/slapd -f "$WORK/slapd/slapd.conf" -h "ldap://127.0.0.1:$SLAPD_PORT/" -d 0 \
    >"$WORK/slapd/log" 2>&1 &
pids+=($!)
# Meridian's default log: the access log's line per operation included,
# to a file as a service's standard error goes to its journal.
MERIDIAN_ADMIN_PASSWORD=secret RUST_LOG= "$MERIDIAN" serve --listen "127.0.0.1:$MERIDIAN_PORT" \
    --config "$WORK/meridian/meridian.toml" --data-dir "$WORK/meridian/data" \
    >"$WORK/meridian/log" 2>&1 &
pids+=($!)
for port in "$SLAPD_PORT" "$MERIDIAN_PORT"; do
    for _ in $(seq 100); do
        ldapsearch -x -H "ldap://127.0.0.1:$port" -b "" -s base >/dev/null 2>&1 && break
        sleep 0.2
    done
done
disk_slapd=$(du -sh "$WORK/slapd/db" | cut -f1)
disk_meridian=$(du -sh "$WORK/meridian/data" | cut -f1)

LAST=$((ENTRIES - 1))
USER_DN="uid=user0,ou=People,dc=example,dc=com"
ADMIN_DN="cn=admin,dc=example,dc=com"
# One run of an SDK tool: its overall operations per second. The tools
# print a line per interval, the overall rates in the last one: column 4
# (ModRate, AuthRate), 5 (SearchRate, which also prints entries per
# search), 6 and 8 (SearchAndModRate's searches and modifies).
sdk() {
    local tool=$1 port=$2; shift 2
    java -cp "$JAR" "com.unboundid.ldap.sdk.examples.$tool" -h 127.0.0.1 -p "$port" \
        -i "$SECONDS_PER_RUN" -I "$INTERVALS" --warmUpIntervals 1 "$@" 2>&1 \
        | awk -v tool="$tool" '
            $1 ~ /^[0-9.]+$/ && NF >= 5 { last = $0 }
            END {
                n = split(last, f, " ")
                if (tool == "SearchAndModRate") r = f[6] + f[8]
                else if (tool == "SearchRate") r = f[5]
                else r = f[4]
                # A tenth kept below 100/s (an unindexed scan of a million
                # entries runs at a few a second), where rounding would
                # move the ratio by a third.
                printf (r < 100 ? "%.1f" : "%.0f"), r
            }'
}
# meridian bench: total operations per second.
mbench() {
    local port=$1 scenario=$2
    "$MERIDIAN" bench run --url "ldap://127.0.0.1:$port" -D "$ADMIN_DN" -w secret \
        --duration "$SECONDS_PER_RUN" --warmup 1 "$scenario" 2>&1 \
        | awk '$1 == "total" { printf "%.0f", $3 }'
}
# A `meridian bench` scenario of random users, 8 sessions x 1000
# outstanding: NAME, DESCRIPTION, then the operation's own lines.
scenario() {
    cat > "$WORK/$1.toml" <<CONF
name = "$1"
description = "$2, 8 sessions x 1000 outstanding"
[target]
url = "ldap://127.0.0.1:$MERIDIAN_PORT"
[load]
sessions = 8
depth = 1000
[keys]
distribution = "uniform"
min = 0
max = $LAST
[[operation]]
$3
CONF
}
scenario pipelined-base "base searches of random users" 'name = "base"
kind = "search"
dn = "uid=user{key},ou=People,dc=example,dc=com"
scope = "base"
filter = "(objectClass=*)"'
scenario pipelined-modify "modifies of random users" 'name = "modify"
kind = "modify"
dn = "uid=user{key},ou=People,dc=example,dc=com"
changes = [{ type = "replace", attribute = "description", values = ["{alnum:12}"] }]'

RANGE="[0-$LAST]"
declare -A workloads=(
    ["base search, 8 threads"]="sdk SearchRate PORT -D $USER_DN -w secret -b uid=user$RANGE,ou=People,dc=example,dc=com -s base -f (objectClass=*) -t 8"
    ["subtree (uid=...), 8 threads"]="sdk SearchRate PORT -D $USER_DN -w secret -b ou=People,dc=example,dc=com -s sub -f (uid=user$RANGE) -t 8"
    ["simple bind as users ({SSHA}), 32 threads"]="sdk AuthRate PORT -b uid=user$RANGE,ou=People,dc=example,dc=com -C secret --bindOnly -t 32"
    ["modify, 8 threads"]="sdk ModRate PORT -D $ADMIN_DN -w secret -b uid=user$RANGE,ou=People,dc=example,dc=com -A description -t 8"
    ["modify, 32 threads"]="sdk ModRate PORT -D $ADMIN_DN -w secret -b uid=user$RANGE,ou=People,dc=example,dc=com -A description -t 32"
    ["search+modify 50/50, 16 threads"]="sdk SearchAndModRate PORT -D $ADMIN_DN -w secret -b ou=People,dc=example,dc=com -s sub -f (uid=user$RANGE) -m description -t 16"
    ["unindexed subtree (employeeNumber=...), 1 thread"]="sdk SearchRate PORT -D $USER_DN -w secret -b ou=People,dc=example,dc=com -s sub -f (employeeNumber=$RANGE) -t 1"
    ["unindexed subtree (employeeNumber=...), 8 threads"]="sdk SearchRate PORT -D $USER_DN -w secret -b ou=People,dc=example,dc=com -s sub -f (employeeNumber=$RANGE) -t 8"
    ["meridian bench pipelined base search, 8 x 1000"]="mbench PORT $WORK/pipelined-base.toml"
    ["meridian bench pipelined modify, 8 x 1000"]="mbench PORT $WORK/pipelined-modify.toml"
)
order=(
    "base search, 8 threads"
    "subtree (uid=...), 8 threads"
    "simple bind as users ({SSHA}), 32 threads"
    "modify, 8 threads"
    "modify, 32 threads"
    "search+modify 50/50, 16 threads"
    "unindexed subtree (employeeNumber=...), 1 thread"
    "unindexed subtree (employeeNumber=...), 8 threads"
    "meridian bench pipelined base search, 8 x 1000"
    "meridian bench pipelined modify, 8 x 1000"
)
# The SPEC's target for each row (docs: ../shared/SPEC.md, "Performance targets").
declare -A targets=(
    ["base search, 8 threads"]="2x"
    ["subtree (uid=...), 8 threads"]="2x"
    ["simple bind as users ({SSHA}), 32 threads"]="2x"
    ["modify, 8 threads"]="20x"
    ["modify, 32 threads"]="20x"
    ["search+modify 50/50, 16 threads"]="10x"
    ["unindexed subtree (employeeNumber=...), 1 thread"]="10x"
    ["unindexed subtree (employeeNumber=...), 8 threads"]="10x"
    ["meridian bench pipelined base search, 8 x 1000"]="1,000,000/s"
    ["meridian bench pipelined modify, 8 x 1000"]="100,000/s durable"
)
run_on() {
    local port=$1 command=${2//PORT/$1}
    # Word splitting is wanted: the command line is a list of words.
    # shellcheck disable=SC2086
    set -f; $command; set +f
}

results=$WORK/RESULTS.md
{
    echo "## slapd and Meridian side by side ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs)"
    echo
    echo "\`ENTRIES=$ENTRIES SECONDS_PER_RUN=$SECONDS_PER_RUN INTERVALS=$INTERVALS $COMMAND_LINE\`:"
    echo "$ENTRIES users, $SECONDS_PER_RUN s per measured interval, $INTERVALS intervals after one of warm-up;"
    echo "each workload run against slapd, Meridian, slapd, Meridian. Clients: UnboundID LDAP SDK $SDK_VERSION"
    echo "tools and \`meridian bench\`, on the same machine as the servers. Ratio: the lower Meridian run"
    echo "over the higher slapd run, to the higher over the lower."
    echo
    echo "| workload | slapd (ops/s) | Meridian (ops/s) | ratio | target |"
    echo "|---|---|---|---|---|"
} > "$results"
for name in "${order[@]}"; do
    echo "== $name"
    s1=$(run_on "$SLAPD_PORT" "${workloads[$name]}")
    m1=$(run_on "$MERIDIAN_PORT" "${workloads[$name]}")
    s2=$(run_on "$SLAPD_PORT" "${workloads[$name]}")
    m2=$(run_on "$MERIDIAN_PORT" "${workloads[$name]}")
    for figure in "$s1" "$m1" "$s2" "$m2"; do
        # A run that measured nothing (a client error, a refused bind)
        # is a broken comparison, not a figure.
        if ! awk -v f="${figure:-0}" 'BEGIN { exit !(f + 0 > 0) }'; then
            echo "$name: a run measured nothing (slapd $s1 / $s2, meridian $m1 / $m2)" >&2
            exit 1
        fi
    done
    ratio=$(python3 -c "s=min($s1,$s2) or 1; m=min($m1,$m2); M=max($m1,$m2); S=max($s1,$s2) or 1; print(f'{m/S:.1f}-{M/s:.1f}x')")
    echo "| $name | $s1 / $s2 | $m1 / $m2 | $ratio | ${targets[$name]} |" | tee -a "$results"
done
{
    echo "| load ($ENTRIES users): slapadd -q / meridian import | $load_slapd | $load_meridian | | 3x |"
    echo "| disk after the load | $disk_slapd | $disk_meridian | | at most slapd's |"
} | tee -a "$results"

# The seed scenarios (bench/scenarios), each on its own data loaded into
# both servers by scripts/bench-seed.py (`meridian bench compare`: one run
# against each server, Meridian first). A row gives operations per second
# and p99 latency.
seed_row() {
    local scenario=$1 model=$2 entries=$3; shift 3
    echo "== seed scenario $scenario"
    mkdir -p "$WORK/seeds"
    python3 scripts/bench-seed.py "$MERIDIAN" "bench/scenarios/$scenario.toml" \
        --model "$model" --entries "$entries" --out "$WORK/seeds" -- "$@" >"$WORK/seeds/$scenario.log" 2>&1 \
        || { cat "$WORK/seeds/$scenario.log" >&2; echo "$scenario: the comparison failed" >&2; exit 1; }
    python3 - "$WORK/seeds/$scenario.json" "$scenario" "$entries" <<'PY' | tee -a "$results"
import json, sys
report, scenario, entries = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
runs = {run["label"]: run["total"] for run in report["runs"]}
m, s = runs["meridian"], runs["slapd"]
if m["rate"] <= 0 or s["rate"] <= 0:
    sys.exit(f"{scenario}: a run measured nothing")
cell = lambda t: f"{t['rate']:,.0f} (p99 {t['latency_us']['p99'] / 1000:.1f} ms{', ' + str(t['errors']) + ' errors' if t['errors'] else ''})"
print(f"| {scenario}, {entries:,} entries | {cell(s)} | {cell(m)} | {m['rate'] / s['rate']:.1f}x | |")
PY
}
{
    echo
    echo "Seed scenarios, one run against each server (\`scripts/bench-seed.py\`), operations per second (p99):"
    echo
    echo "| scenario | slapd | Meridian | ratio | target |"
    echo "|---|---|---|---|---|"
} >> "$results"
if [ "$ENTRIES" -le 2000 ]; then
    # The smoke run: one small scenario, to check the path works.
    seed_row seed002-read-by-indexed seed002 2000 --count 50
else
    timed=(--duration "$SECONDS_PER_RUN" --warmup 2)
    seed_row seed000-modify seed000 1000000 "${timed[@]}"
    seed_row seed000-mixed-80-20 seed000 1000000 "${timed[@]}"
    seed_row seed001-mix-1-2-1 seed000 1000000 "${timed[@]}"
    seed_row seed002-read-by-indexed seed002 50000
    seed_row seed002-read-by-unindexed seed002 50000
    seed_row seed002-parallel-readers seed002 50000 "${timed[@]}"
    # Not seed 003's user profile: its data holds dynamic entries (RFC
    # 2589), which slapd refuses without the dds overlay, and
    # bench-seed.py sets up none.
    seed_row seed004-result-sizes seed002 50000 "${timed[@]}"
fi
echo
echo "table written to $results"
if $UPDATE_DOCS; then
    # The table between the markers at the top of docs/BENCHMARKS.md is
    # replaced; the history below it stays.
    python3 - "$results" docs/BENCHMARKS.md <<'PY'
import sys
table, doc = open(sys.argv[1]).read(), sys.argv[2]
text = open(doc).read()
begin, end = "<!-- compare:begin -->", "<!-- compare:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc, "w").write(f"{head}{begin}\n{table}{end}{tail}")
PY
    echo "docs/BENCHMARKS.md updated"
fi
