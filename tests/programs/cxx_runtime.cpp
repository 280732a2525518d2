// tests/programs/cxx_runtime.cpp - a C++ program of the kind pcmalloc is
// preloaded into: the standard library's containers, operator new and
// delete in every form (arrays, sized, over-aligned, nothrow), exceptions
// (each one malloc'd by the C++ runtime) thrown in threads and rethrown in
// another, and objects made on one thread and destroyed on another.  It
// checks what it can itself (alignment, contents) and prints a summary
// that must be the same with pcmalloc preloaded as without (cxx.sh).
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok && failures++ < 10)
        std::printf("FAILED: %s\n", what);
}

static std::uint64_t mix(std::uint64_t h, std::uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

// Maps, hash maps, lists and deques grown, shrunk and walked.
static std::uint64_t containers()
{
    std::map<std::string, std::vector<int>> tree;
    std::unordered_map<int, std::string> hash;
    std::list<std::string> list;
    std::deque<long> deque;
    for (int i = 0; i < 200000; i++) {
        std::string key = "key-" + std::to_string(i % 5000) + std::string(i % 40, 'x');
        tree[key].push_back(i);
        hash[i % 30000] = key;
        if (i % 3 == 0)
            list.push_back(key);
        deque.push_back(i);
        if (i % 7 == 0) {
            tree.erase(tree.begin());
            deque.pop_front();
        }
    }
    list.sort();
    std::uint64_t h = 0;
    for (const auto &kv : tree)
        h = mix(h, kv.first.size() * 131 + kv.second.size() + (kv.second.empty() ? 0 : kv.second.back()));
    for (int i = 0; i < 30000; i += 97)
        h = mix(h, hash[i].size());
    for (const auto &s : list)
        h = mix(h, s.size());
    for (long v : deque)
        h = mix(h, static_cast<std::uint64_t>(v));
    return h;
}

template <std::size_t Align> struct alignas(Align) Aligned {
    unsigned char bytes[Align + 8];
};

template <std::size_t Align> static void aligned_new_and_delete()
{
    std::vector<Aligned<Align> *> made;
    for (int i = 0; i < 64; i++) {
        auto *p = new Aligned<Align>;
        check(reinterpret_cast<std::uintptr_t>(p) % Align == 0, "new of an over-aligned type is aligned");
        p->bytes[0] = static_cast<unsigned char>(i);
        p->bytes[Align + 7] = static_cast<unsigned char>(i);
        made.push_back(p);
    }
    auto *array = new Aligned<Align>[5];
    check(reinterpret_cast<std::uintptr_t>(array) % Align == 0, "new[] of an over-aligned type is aligned");
    delete[] array;
    for (int i = 0; i < 64; i++) {
        check(made[i]->bytes[0] == i && made[i]->bytes[Align + 7] == i, "over-aligned object kept its bytes");
        delete made[i];
    }
}

// Every form of operator new and delete the standard names, called
// directly as well as through expressions.
static void operator_new_forms()
{
    for (std::size_t size = 1; size < 70000; size = size * 3 / 2 + 1) {
        void *p = ::operator new(size);
        static_cast<unsigned char *>(p)[size - 1] = 1;
        ::operator delete(p, size); // sized
        void *q = ::operator new[](size);
        ::operator delete[](q, size);
        void *r = ::operator new(size, std::nothrow);
        check(r != nullptr, "nothrow new of a small size");
        ::operator delete(r, std::nothrow);
        void *a = ::operator new(size, std::align_val_t{512});
        check(reinterpret_cast<std::uintptr_t>(a) % 512 == 0, "aligned operator new");
        ::operator delete(a, size, std::align_val_t{512});
    }
    // A request no allocator can meet: bad_alloc, and nullptr from nothrow.
    bool threw = false;
    try {
        void *p = ::operator new(static_cast<std::size_t>(-1) / 2);
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "an impossible new throws bad_alloc");
    check(::operator new(static_cast<std::size_t>(-1) / 2, std::nothrow) == nullptr,
          "an impossible nothrow new returns nullptr");
    aligned_new_and_delete<64>();
    aligned_new_and_delete<256>();
    aligned_new_and_delete<4096>();
}

// Threads throw; the exceptions travel to the main thread as
// exception_ptr and are rethrown and caught there.
static std::uint64_t exceptions_across_threads()
{
    const int threads = 8, per_thread = 2000;
    std::vector<std::exception_ptr> caught(threads * per_thread);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; t++)
        workers.emplace_back([t, &caught] {
            for (int i = 0; i < per_thread; i++) {
                try {
                    throw std::runtime_error("error " + std::to_string(t) + "/" + std::to_string(i) +
                                             std::string(i % 300, '!'));
                } catch (...) {
                    caught[t * per_thread + i] = std::current_exception();
                }
            }
        });
    for (auto &w : workers)
        w.join();
    std::uint64_t h = 0;
    for (auto &e : caught) {
        try {
            std::rethrow_exception(e);
        } catch (const std::runtime_error &error) {
            h = mix(h, std::string(error.what()).size());
        }
        e = nullptr;
    }
    return h;
}

// Producers make strings, consumers on other threads check and destroy
// them: nearly every delete frees what another thread allocated.
static std::uint64_t handed_between_threads()
{
    const int producers = 6, consumers = 6, per_producer = 40000;
    std::mutex lock;
    std::condition_variable ready;
    std::deque<std::unique_ptr<std::string>> queue;
    std::vector<std::uint64_t> sums(consumers);
    int producers_left = producers;
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; p++)
        threads.emplace_back([&, p] {
            for (int i = 0; i < per_producer; i++) {
                auto s = std::make_unique<std::string>(static_cast<std::size_t>(8 + (i * 37 + p) % 900),
                                                       static_cast<char>('a' + (i + p) % 26));
                std::lock_guard<std::mutex> guard(lock);
                queue.push_back(std::move(s));
                ready.notify_one();
            }
            std::lock_guard<std::mutex> guard(lock);
            if (--producers_left == 0)
                ready.notify_all();
        });
    for (int c = 0; c < consumers; c++)
        threads.emplace_back([&, c] {
            for (;;) {
                std::unique_ptr<std::string> s;
                {
                    std::unique_lock<std::mutex> guard(lock);
                    ready.wait(guard, [&] { return !queue.empty() || producers_left == 0; });
                    if (queue.empty())
                        return;
                    s = std::move(queue.front());
                    queue.pop_front();
                }
                bool same = std::all_of(s->begin(), s->end(), [&](char ch) { return ch == (*s)[0]; });
                check(same, "a string handed between threads kept its contents");
                sums[c] += s->size();
            }
        });
    for (auto &t : threads)
        t.join();
    std::uint64_t total = 0;
    for (auto s : sums)
        total += s;
    return total;
}

// shared_ptr copies dropped on many threads: the last one frees.
static long shared_between_threads()
{
    std::vector<std::shared_ptr<std::vector<int>>> shared;
    for (int i = 0; i < 1000; i++)
        shared.push_back(std::make_shared<std::vector<int>>(static_cast<std::size_t>(i % 100 + 1), i));
    std::vector<std::thread> threads;
    std::vector<long> sums(8);
    for (int t = 0; t < 8; t++)
        threads.emplace_back([t, copies = shared, &sums]() mutable {
            for (auto &p : copies)
                sums[t] += p->back();
            copies.clear();
        });
    shared.clear();
    for (auto &t : threads)
        t.join();
    long total = 0;
    for (long s : sums)
        total += s;
    return total;
}

int main()
{
    std::printf("containers %016llx\n", static_cast<unsigned long long>(containers()));
    operator_new_forms();
    std::printf("operator new and delete: every form\n");
    std::printf("exceptions %016llx\n", static_cast<unsigned long long>(exceptions_across_threads()));
    std::printf("handed between threads %llu bytes\n", static_cast<unsigned long long>(handed_between_threads()));
    std::printf("shared between threads %ld\n", shared_between_threads());
    std::printf("%d failures\n", failures);
    return failures != 0;
}
