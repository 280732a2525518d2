#!/usr/bin/env bash
# tests/programs/redis.sh - redis-server on 127.0.0.1, without and then with
# pcmalloc preloaded (into the server and into redis-benchmark): the
# benchmark's mixed commands from 16 clients in 2 threads, then a
# generated dataset (strings of 1 byte to 1 MiB, a value grown by APPEND,
# lists, hashes, sets, sorted sets, deletions, UNLINKs freed by the lazyfree
# thread) loaded with redis-cli --pipe.  Both sessions must print the same
# dataset digest and replies, the server must exit cleanly, and the
# preloaded server must have libpcmalloc.so in its /proc/PID/maps and print
# pcmalloc's statistics at exit.
#
# Debian's redis-server is built with USE_JEMALLOC against the shared
# libjemalloc.so.2, calling it by the plain names: preloading pcmalloc
# takes over malloc, calloc, realloc, free and malloc_usable_size (which
# redis's used_memory counts), while mallctl (the allocator_* fields of
# INFO memory) and nallocx still answer from jemalloc, which then serves
# nothing.  INFO memory's figures of both runs are printed for that reason.
# No --io-threads: its threads spin while waiting, and on a busy 2-core
# machine the benchmark then ran 40 times slower, with glibc's malloc too.
. "$(dirname "$0")/lib.sh"
server=$(program redis-server) || no_program
cli=$(program redis-cli) || no_program
benchmark=$(program redis-benchmark) || no_program
requests=$(scaled 20000)
strings=$(scaled 20000)

# The dataset, in the protocol redis-cli --pipe sends as it is.
awk -v strings="$strings" 'function cmd(n, a,    i, s) {
        s = "*" n "\r\n"
        for (i = 1; i <= n; i++) s = s "$" length(a[i]) "\r\n" a[i] "\r\n"
        printf "%s", s
        delete a
    }
    function fill(c, len,    s) {
        s = c
        while (length(s) < len) s = s s
        return substr(s, 1, len)
    }
    BEGIN {
        for (i = 0; i < strings; i++) {
            a[1] = "SET"; a[2] = "s:" i; a[3] = fill(sprintf("%c", 97 + i % 26), 1 + (i * 131) % 2000); cmd(3, a)
        }
        for (i = 0; i < 16; i++) {
            a[1] = "SET"; a[2] = "big:" i; a[3] = fill(sprintf("%x", i), 262144 + i * 49152); cmd(3, a)
        }
        for (i = 0; i < 256; i++) {
            a[1] = "APPEND"; a[2] = "grow"; a[3] = fill(sprintf("%c", 65 + i % 26), 4096); cmd(3, a)
        }
        for (j = 0; j < 50; j++) {
            a[1] = "RPUSH"; a[2] = "list:" j
            for (k = 0; k < 200; k++) a[k + 3] = "item-" j "-" k
            cmd(202, a)
            a[1] = "SADD"; a[2] = "set:" j
            for (k = 0; k < 100; k++) a[k + 3] = "member-" (j * 7 + k * 13) % 1000
            cmd(102, a)
            a[1] = "ZADD"; a[2] = "zset:" j
            for (k = 0; k < 100; k++) { a[2 * k + 3] = (k * 37) % 101; a[2 * k + 4] = "z-" k }
            cmd(202, a)
        }
        for (j = 0; j < 200; j++) {
            a[1] = "HSET"; a[2] = "hash:" j
            for (k = 0; k < 50; k++) { a[2 * k + 3] = "field-" k; a[2 * k + 4] = fill("v", 1 + (j + k) % 300) }
            cmd(102, a)
        }
        for (i = 0; i < strings; i += 5) { a[1] = "DEL"; a[2] = "s:" i; cmd(2, a) }
        for (i = 0; i < 8; i++) { a[1] = "UNLINK"; a[2] = "big:" i; cmd(2, a) }
        for (i = 1; i < strings; i += 7) { a[1] = "SETRANGE"; a[2] = "s:" i; a[3] = 3000; a[4] = "tail"; cmd(4, a) }
    }' >"$work/dataset.resp"

# session SIDE [VAR=VALUE...]: one server's life, what must match in
# $work/SIDE.out, INFO memory in $work/SIDE.memory, the server's pid in
# server_pid and whether libpcmalloc.so was in its maps in SIDE_mapped.
server_pid=
at_exit '[ -z "$server_pid" ] || kill -9 "$server_pid" 2>/dev/null'
session() {
    local side=$1 port try pid
    shift
    local rcli=("$cli" -h 127.0.0.1)
    mkdir -p "$work/$side"
    # A free port: try a few at random; a taken one makes the server exit.
    for try in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 20000))
        # No timeout(1) around the server: its pid must be the server's,
        # for the maps check and for at_exit to kill it; every client
        # command is bounded instead.
        env "$@" "$server" --bind 127.0.0.1 --port "$port" --dir "$work/$side" \
            --save '' --appendonly no --logfile '' --enable-debug-command yes \
            --lazyfree-lazy-user-del yes \
            >"$work/$side/server.log" 2>"$work/$side/server.err" &
        pid=$!
        server_pid=$pid
        for _ in $(seq 50); do
            "${rcli[@]}" -p "$port" PING 2>/dev/null | grep -q PONG && break 2
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        server_pid=
    done
    rcli+=(-p "$port")
    {
        echo "benchmark:"
        timeout 120 env "$@" "$benchmark" -h 127.0.0.1 -p "$port" --csv -n "$requests" -c 16 -P 4 \
            -r 10000 -d 256 --threads 2 \
            -t set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset \
            2>"$work/$side/benchmark.err" | cut -d, -f1 | tr -d '"'
        echo "benchmark exit ${PIPESTATUS[0]}"
        "${rcli[@]}" FLUSHALL
        timeout 120 "${rcli[@]}" --pipe <"$work/dataset.resp" | grep -E '^errors'
        "${rcli[@]}" INFO memory >"$work/$side.memory"
        for query in DBSIZE "DEBUG DIGEST" "STRLEN grow" "GETRANGE grow 4090 4100" "STRLEN s:8" \
            "GETRANGE s:8 2995 3010" "EXISTS big:3 big:12" "STRLEN big:15" "LRANGE list:7 195 -1" \
            "HGET hash:3 field-49" "ZRANGE zset:4 0 4 WITHSCORES" "SCARD set:9"; do
            echo "$query: $("${rcli[@]}" $query | tr '\0\n' '. ')"
        done
        local pid_of_server
        pid_of_server=$("${rcli[@]}" INFO server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
        if grep -q libpcmalloc "/proc/$pid_of_server/maps" 2>/dev/null; then
            eval "${side}_mapped=yes"
        else
            eval "${side}_mapped=no"
        fi
        "${rcli[@]}" SHUTDOWN NOSAVE 2>/dev/null
        wait "$server_pid"
        echo "server exit $?"
        server_pid=
    } >"$work/$side.out" 2>&1
}

field() { sed -n "s/^$2:\([^[:space:]]*\).*/\1/p" "$work/$1.memory"; }
memory_line() {
    echo "used_memory $(field "$1" used_memory_human), allocator_allocated $(field "$1" allocator_allocated) (mem_allocator $(field "$1" mem_allocator))"
}

session plain
session pcm LD_PRELOAD="$PCM_LIB" PCMALLOC_STATS=1
name="redis-server+redis-benchmark ($requests requests a test, $strings strings)"
ok=1
same_sessions "$name" || ok=0
if ! grep -qx 'benchmark exit 0' "$work/plain.out" || ! grep -qx 'server exit 0' "$work/plain.out" ||
    ! grep -qx 'errors: 0, replies: [0-9]*' "$work/plain.out"; then
    echo "FAIL $name: the session failed even without pcmalloc:"
    cat "$work/plain.out" "$work/plain/server.err" | head -30
    ok=0
fi
if [ "$plain_mapped" != no ] || [ "$pcm_mapped" != yes ]; then
    echo "FAIL $name: libpcmalloc.so in the server's maps: $plain_mapped without it, $pcm_mapped with it"
    ok=0
fi
check_served "$name" served "$work/pcm/server.err" "from the server at exit" || ok=0
check_served "$name" bench_served "$work/pcm/benchmark.err" "from redis-benchmark at exit" || ok=0
echo "     INFO memory without pcmalloc: $(memory_line plain)"
echo "     INFO memory with pcmalloc:    $(memory_line pcm)"
conclude "$ok" "$name (same replies and digest; server's pcmalloc: $served; benchmark's: $bench_served)"
finish
