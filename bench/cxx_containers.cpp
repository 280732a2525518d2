// bench/cxx_containers.cpp - C++ as C++ programs allocate: through the
// standard library's containers, so through operator new and the sized
// operator delete, never malloc by name.  Each thread keeps its own
// std::map from std::string keys to std::vector<uint32_t> and
// std::unordered_map from numbers to std::string, and does random
// operations on them: look a key up or insert it and append to its vector
// (the vector grows by reallocation), erase a key with its vector, set a
// number's string (8..80 characters: some in the string's own small
// buffer, most on the heap) or erase it.  Nothing is shared.
//
//   cxx_containers threads=T ops=N keys=K
// N operations in all, split over the threads, on K keys per thread;
// prints operations per second.  The checksum sums what the operations
// read, the same under every allocator.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench.h"

static long ops_total, key_count;
static int thread_count;
static uint64_t sums[256][8]; // one cache line per thread

// Key i as text: a fixed prefix, so comparisons read past the first
// characters, and a length of 12..40 from the number.
static std::string key_text(uint64_t i)
{
    std::string key = "key-" + std::to_string(i);
    key.append(8 + i % 29, static_cast<char>('a' + i % 26));
    return key;
}

static void operations(int index, void *)
{
    bench_rng rng = bench_seed(static_cast<uint64_t>(index) + 7000);
    std::map<std::string, std::vector<uint32_t>> tree;
    std::unordered_map<uint64_t, std::string> table;
    long mine = ops_total / thread_count;
    uint64_t sum = 0;
    for (long op = 0; op < mine; op++) {
        uint64_t draw = bench_below(&rng, 100);
        uint64_t key = bench_below(&rng, static_cast<uint64_t>(key_count));
        if (draw < 40) {
            std::vector<uint32_t> &values = tree[key_text(key)];
            values.push_back(static_cast<uint32_t>(op));
            sum += values.size();
        } else if (draw < 60) {
            sum += tree.erase(key_text(key));
        } else if (draw < 90) {
            std::string &text = table[key];
            text.assign(8 + bench_below(&rng, 73), static_cast<char>('A' + key % 26));
            sum += text.size();
        } else {
            sum += table.erase(key);
        }
    }
    for (const auto &entry : tree)
        sum += entry.first.size() + entry.second.size();
    sums[index][0] = sum + table.size();
}

int main(int argc, char **argv)
{
    thread_count = static_cast<int>(bench_arg(argc, argv, "threads", 1));
    ops_total = bench_arg(argc, argv, "ops", 2000000);
    key_count = bench_arg(argc, argv, "keys", 4096);
    bench_args_done(argc, argv);
    if (thread_count < 1 || thread_count > 256 || ops_total < 1 || key_count < 1)
        bench_fail("need 1 <= threads <= 256 and positive ops and keys");
    double elapsed = bench_run_threads(thread_count, operations, nullptr);
    uint64_t checksum = 0;
    for (int i = 0; i < thread_count; i++)
        checksum += sums[i][0];
    bench_report_throughput(static_cast<double>(ops_total / thread_count) * thread_count, elapsed, "ops/s",
                            checksum);
    return 0;
}
