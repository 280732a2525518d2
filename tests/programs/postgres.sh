#!/usr/bin/env bash
# tests/programs/postgres.sh - a PostgreSQL server, without and then with
# pcmalloc preloaded into initdb, the server (the postmaster and every
# backend and worker it forks) and pgbench: initdb, pgbench's TPC-B-like
# load from 8 clients on 2 threads, then queries whose results must match
# between the two sessions - pgbench's invariant (accounts, tellers and
# branches hold the same total, one history row per transaction) and a
# workload of sorts, hash joins and aggregates over generated text and
# jsonb.  Each server listens on a socket in the test's own directory (no
# TCP) and must shut down cleanly; the preloaded one must have printed
# pcmalloc's statistics from its processes.  PostgreSQL refuses to run as
# root: as root the test runs it as the package's `postgres` user.
. "$(dirname "$0")/lib.sh"
bin=
for dir in "$PCM_PROGRAM_ROOT"/usr/lib/postgresql/*/bin; do
    [ -x "$dir/postgres" ] && [ -x "$dir/pgbench" ] && bin=$dir
done
if [ -z "$bin" ]; then
    echo "FAIL no PostgreSQL server in $PCM_PROGRAM_ROOT/usr/lib/postgresql/*/bin (postgresql: scripts/deps.sh)"
    no_program
fi
transactions=$(scaled 1000)

as_db=()
if [ "$(id -u)" -eq 0 ]; then
    as_db=(runuser -u postgres --)
    chown postgres "$work"
fi
# The library where the server's user can read it, whatever the checkout's
# permissions.
cp "$PCM_LIB" "$work/libpcmalloc.so"
chmod 755 "$work/libpcmalloc.so"

cat >"$work/checks.sql" <<'EOF'
\pset footer off
SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT sum(bbalance) FROM pgbench_branches)
   AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT sum(bbalance) FROM pgbench_branches)
   AS balances_agree,
   (SELECT count(*) FROM pgbench_history) AS history_rows;
CREATE TABLE words AS
    SELECT i, md5(i::text) AS h, repeat(chr(97 + i % 26), 1 + i % 700) AS body
    FROM generate_series(1, 60000) AS i;
CREATE TABLE pairs AS SELECT i, (i * 7919) % 60000 + 1 AS j FROM generate_series(1, 60000) AS i;
SELECT count(*), sum(length(w.body)), md5(string_agg(w.h, ',' ORDER BY w.h))
    FROM words w JOIN pairs p ON p.j = w.i;
SELECT left(h, 2) AS prefix, count(*), max(length(body))
    FROM words GROUP BY left(h, 2) ORDER BY count(*) DESC, prefix LIMIT 5;
SELECT md5(string_agg(doc::text, '' ORDER BY i))
    FROM (SELECT i, jsonb_build_object('i', i, 'h', h, 'tags', jsonb_build_array(i % 3, left(body, 20))) AS doc
          FROM words WHERE i % 10 = 0) AS d;
WITH RECURSIVE chain(n, s) AS (SELECT 1, 'x'::text UNION ALL SELECT n + 1, s || n FROM chain WHERE n < 2000)
SELECT max(n), length(max(s)) FROM chain;
SELECT md5(array_to_string(array_agg(body ORDER BY body DESC, i), '')) FROM words WHERE i % 97 = 0;
EOF

# session SIDE [VAR=VALUE...]: one server's life, its results in
# $work/SIDE.out and its log in $work/SIDE/server.log.
server_data=
at_exit '[ -z "$server_data" ] || "${as_db[@]}" "$bin/pg_ctl" -D "$server_data" -m immediate stop >/dev/null 2>&1'
session() {
    local side=$1
    shift
    local dir=$work/$side
    mkdir "$dir"
    [ ${#as_db[@]} -eq 0 ] || chown postgres "$dir"
    local db=("${as_db[@]}" env "$@")
    local client=(-h "$dir" -p 5432)
    {
        timeout 120 "${db[@]}" "$bin/initdb" -D "$dir/data" -A trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
        echo "initdb exit $?"
        server_data=$dir/data
        timeout 60 "${db[@]}" "$bin/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" \
            -o "-c listen_addresses='' -k $dir -p 5432 -c fsync=off" start >>"$dir/pg_ctl.log" 2>&1
        echo "start exit $?"
        timeout 120 "${db[@]}" "$bin/pgbench" "${client[@]}" -i -s 2 -q postgres >"$dir/init.log" 2>&1
        echo "pgbench -i exit $?"
        timeout 300 "${db[@]}" "$bin/pgbench" "${client[@]}" -c 8 -j 2 -t "$transactions" postgres \
            >"$dir/bench.log" 2>&1
        echo "pgbench exit $?, $(grep -E '^number of (transactions actually processed|failed)' "$dir/bench.log" |
            tr '\n' ' ')"
        timeout 120 "${db[@]}" "$bin/psql" "${client[@]}" -X -q -A -v ON_ERROR_STOP=1 -f "$work/checks.sql" \
            postgres 2>"$dir/psql.err"
        echo "psql exit $?"
        timeout 60 "${db[@]}" "$bin/pg_ctl" -D "$dir/data" -w -m fast stop >>"$dir/pg_ctl.log" 2>&1
        echo "stop exit $?"
        server_data=
    } >"$work/$side.out" 2>&1
}

session plain
session pcm LD_PRELOAD="$work/libpcmalloc.so" PCMALLOC_STATS=1
name="postgres: initdb, pgbench -c 8 -j 2 -t $transactions, joins, sorts, jsonb"
ok=1
same_sessions "$name" || ok=0
expected_history="t|$((8 * transactions))"
if ! grep -qx "$expected_history" "$work/plain.out" || ! grep -qx 'psql exit 0' "$work/plain.out" ||
    ! grep -qx 'stop exit 0' "$work/plain.out"; then
    echo "FAIL $name: the session failed even without pcmalloc (want \"$expected_history\"):"
    head -40 "$work/plain.out"
    tail -5 "$work/plain/server.log" "$work/plain/psql.err"
    ok=0
fi
if grep -E 'PANIC|terminated by signal|server process .* exited with' "$work/pcm/server.log" | head -5 | grep .; then
    echo "FAIL $name: the preloaded server's log reports the above"
    ok=0
fi
check_served "$name" served "$work/pcm/server.log" "in the preloaded server's log" || ok=0
conclude "$ok" "$name (same results; the server's processes: pcmalloc $served)"
finish
