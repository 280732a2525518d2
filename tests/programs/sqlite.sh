#!/usr/bin/env bash
# tests/programs/sqlite.sh - sqlite3 on a generated workload: an on-disk
# database with indexes built before and after the data, transactions
# committed and rolled back, savepoints, updates and deletes through the
# indexes, joins, window functions, JSON, VACUUM and an integrity check.
# The data come from recursive CTEs with deterministic arithmetic, so both
# runs print the same results; text of varying lengths (up to a few KiB:
# overflow pages) keeps sqlite's page cache and sorter busy in malloc.
. "$(dirname "$0")/lib.sh"
sqlite=$(program sqlite3) || no_program
customers=$(scaled 20000)
orders=$(scaled 60000)

# .open --new empties the file, so the second run starts where the first
# one did.
cat >"$work/workload.sql" <<SQL
.open --new $work/test.db
.bail on
PRAGMA cache_size = -8000;
PRAGMA journal_mode = WAL;
-- No fsync: the test is of memory, not of the disk.
PRAGMA synchronous = OFF;
CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, balance INTEGER);
CREATE INDEX customer_city ON customer (city, balance);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $customers)
INSERT INTO customer
SELECT i, printf('customer-%08x', (i * 2654435761) % 4294967296),
       'city-' || (i * 7919 % 97), (i * 104729) % 100000 - 50000 FROM n;
COMMIT;
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customer, amount INTEGER, note TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $orders)
INSERT INTO orders
SELECT i, 1 + (i * 48271) % $customers, (i * 16807) % 10007,
       substr(replace(hex(zeroblob(2048)), '00', printf('%x', i % 16)), 1, (i * 131) % 3000) FROM n;
COMMIT;
-- Indexes over existing data: sqlite sorts them in memory.
CREATE INDEX orders_customer ON orders (customer, amount);
CREATE INDEX orders_note ON orders (substr(note, 1, 16), length(note));
-- A transaction rolled back must leave no trace.
BEGIN;
DELETE FROM orders WHERE amount % 2 = 0;
UPDATE customer SET name = upper(name) || name;
ROLLBACK;
SELECT 'after rollback', count(*), sum(amount) FROM orders;
BEGIN;
UPDATE customer SET balance = balance + 1000 WHERE city IN ('city-3', 'city-5', 'city-8');
SAVEPOINT sp;
DELETE FROM orders WHERE customer % 10 = 0;
ROLLBACK TO sp;
DELETE FROM orders WHERE amount < 1000;
UPDATE orders SET note = note || note WHERE id % 97 = 0;
RELEASE sp;
COMMIT;
SELECT 'orders', count(*), sum(amount), sum(length(note)) FROM orders;
SELECT city, count(*), sum(balance) FROM customer GROUP BY city ORDER BY city LIMIT 5;
SELECT c.name, count(o.id), sum(o.amount) FROM customer c JOIN orders o ON o.customer = c.id
 GROUP BY c.id ORDER BY sum(o.amount) DESC, c.id LIMIT 5;
SELECT id, amount, rank() OVER (PARTITION BY customer ORDER BY amount DESC, id) FROM orders
 WHERE customer = 1234 % $customers + 1 ORDER BY id;
SELECT length(json_group_array(json_object('id', id, 'name', name))) FROM customer WHERE balance > 40000;
SELECT count(DISTINCT substr(note, 1, 16)), max(length(note)) FROM orders;
DELETE FROM customer WHERE id NOT IN (SELECT customer FROM orders);
VACUUM;
PRAGMA integrity_check;
SELECT 'customers left', count(*) FROM customer;
SQL
compare_run "sqlite3-$customers-customers-$orders-orders" "$sqlite" -batch "" ".read $work/workload.sql"
finish
