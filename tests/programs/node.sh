#!/usr/bin/env bash
# tests/programs/node.sh - Node.js, without and then with pcmalloc
# preloaded: four worker threads (V8 isolates of their own, each with
# threads of its own) build strings, deflate and inflate them with zlib on
# the main thread's pool and their own, hash them with OpenSSL, round-trip
# them through JSON and keep a Map of arrays, and post their digests back.
# C++'s operator new in node and V8 is pcmalloc's when preloaded, as are
# zlib's and OpenSSL's mallocs; the JavaScript heap is V8's own mappings.
# Both runs must print the same digests and exit 0.
. "$(dirname "$0")/lib.sh"
node=$(program node nodejs) || no_program
rounds=$(scaled 200)

cat >"$work/workers.js" <<'EOF'
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const zlib = require('zlib');
const crypto = require('crypto');

if (isMainThread) {
    const rounds = Number(process.argv[2]);
    const results = [];
    let done = 0;
    for (let i = 0; i < 4; i++) {
        const w = new Worker(__filename, { workerData: { id: i, rounds } });
        w.on('message', (m) => {
            results[i] = m;
            if (++done === 4) {
                // The pool's threads too: asynchronous deflates from here.
                const text = results.join('\n');
                zlib.deflate(Buffer.from(text.repeat(200)), (err, z) => {
                    if (err) throw err;
                    zlib.inflate(z, (err2, back) => {
                        if (err2) throw err2;
                        console.log(text);
                        console.log(`pool round trip ${back.length} bytes, ${back.toString() === text.repeat(200)}`);
                    });
                });
            }
        });
        w.on('error', (e) => { console.error(e); process.exit(1); });
    }
} else {
    const { id, rounds } = workerData;
    const hash = crypto.createHash('sha256');
    const kept = new Map();
    for (let r = 0; r < rounds; r++) {
        const parts = [];
        for (let k = 0; k < 500; k++)
            parts.push(`${id}:${r}:${k}:` + 'x'.repeat((k * 37 + r) % 300));
        const s = parts.join('|');
        const z = zlib.deflateSync(Buffer.from(s));
        if (zlib.inflateSync(z).toString() !== s)
            throw new Error(`worker ${id} round ${r}: inflate gave something else`);
        hash.update(z);
        kept.set(r % 50, parts);
        const copy = JSON.parse(JSON.stringify({ a: parts.slice(0, 50), r }));
        hash.update(String(copy.a.join('').length));
    }
    parentPort.postMessage(`worker ${id} ${hash.digest('hex')} ${kept.size}`);
}
EOF

compare_run "node: 4 worker threads, zlib, OpenSSL, JSON ($rounds rounds each)" "$node" "$work/workers.js" "$rounds"
finish
