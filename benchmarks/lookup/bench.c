/* Lookup benchmark of the C table core (offlink/runtime/table.c) against the data structures
 * offload runtimes use today, on the same rows and the same queries, in one run.
 *
 *   bench TABLE_FILE [QUERIES]
 *
 * - offlink: ofl_table_find (the B+ tree index in the table), ofl_table_find_many (batch),
 *   ofl_table_lookup (binary search on names), ofl_table_open (validation incl. CRC).
 * - bsearch: branchless binary search over a sorted array of starts (what a runtime would
 *   build at load time: it has to sort).
 * - rbtree: glibc tsearch/tfind (a red-black tree, like LLVM libomptarget's std::map/std::set)
 *   with libgomp's range comparison: a key compares equal to the range it falls in.
 * - splay: a top-down splay tree with the same comparison (libgomp's splay_tree).
 *
 * "thr" is throughput: independent lookups back to back, as a loop over many addresses runs.
 * "lat" is latency: each lookup's address depends on the previous result, so nothing overlaps.
 * Every figure is the best of REPS runs, in ns per lookup. Results are cross-checked. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "table.h"

#define REPS 7

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}

static volatile int64_t sink;

/* ---- baselines ----------------------------------------------------------------------------- */

struct range {
  int64_t start;
  uint64_t size;
  int64_t row;
};

/* libgomp's comparison: ranges do not overlap, and a query [x, x+1) equals the range it is in. */
static int range_cmp(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  if ((uint64_t)x->start + x->size <= (uint64_t)y->start && x->start < y->start)
    return -1;
  if ((uint64_t)y->start + y->size <= (uint64_t)x->start && y->start < x->start)
    return 1;
  return 0;
}

static int64_t rb_find(void *root, int64_t x) {
  struct range key = {x, 1, 0};
  void *hit = tfind(&key, &root, range_cmp);
  return hit ? (*(struct range **)hit)->row : -1;
}

struct snode {
  struct range r;
  struct snode *left, *right;
};

/* Sleator's top-down splay: bring the node for `key` (or a neighbour) to the root. */
static struct snode *splay(struct snode *t, const struct range *key) {
  struct snode n = {{0, 0, 0}, NULL, NULL}, *l = &n, *r = &n, *y;
  if (t == NULL)
    return t;
  for (;;) {
    int c = range_cmp(key, &t->r);
    if (c < 0) {
      if (t->left == NULL)
        break;
      if (range_cmp(key, &t->left->r) < 0) {
        y = t->left;
        t->left = y->right;
        y->right = t;
        t = y;
        if (t->left == NULL)
          break;
      }
      r->left = t;
      r = t;
      t = t->left;
    } else if (c > 0) {
      if (t->right == NULL)
        break;
      if (range_cmp(key, &t->right->r) > 0) {
        y = t->right;
        t->right = y->left;
        y->left = t;
        t = y;
        if (t->right == NULL)
          break;
      }
      l->right = t;
      l = t;
      t = t->right;
    } else {
      break;
    }
  }
  l->right = t->left;
  r->left = t->right;
  t->left = n.right;
  t->right = n.left;
  return t;
}

static struct snode *splay_root;

static int64_t splay_find(int64_t x) {
  struct range key = {x, 1, 0};
  splay_root = splay(splay_root, &key);
  return range_cmp(&key, &splay_root->r) == 0 ? splay_root->r.row : -1;
}

static struct snode *splay_build(struct snode *nodes, size_t lo, size_t hi) {
  if (lo >= hi)
    return NULL;
  size_t mid = lo + (hi - lo) / 2;
  nodes[mid].left = splay_build(nodes, lo, mid);
  nodes[mid].right = splay_build(nodes, mid + 1, hi);
  return &nodes[mid];
}

static int64_t *bs_start;
static uint64_t *bs_size;
static int64_t *bs_row;
static size_t bs_n;

static int64_t bs_find(int64_t x) {
  if (bs_n == 0 || x < bs_start[0])
    return -1;
  const int64_t *base = bs_start;
  size_t len = bs_n;
  while (len > 1) { /* branchless: the compare selects, it does not branch */
    size_t half = len / 2;
    base = base[half] <= x ? base + half : base;
    len -= half;
  }
  size_t i = (size_t)(base - bs_start);
  return (uint64_t)x - (uint64_t)bs_start[i] < bs_size[i] ? bs_row[i] : -1;
}

static int range_by_start(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

struct named {
  const char *name;
  int64_t row;
};

static int named_cmp(const void *a, const void *b) {
  return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/* ---- timing ------------------------------------------------------------------------------ */

static const ofl_table *T;
static void *rb_root, *rb_names;

enum method { OFL, OFL_MANY, BS, RB, SPLAY };

static int64_t find_with(enum method m, int64_t x) {
  switch (m) {
  case OFL:
    return ofl_table_find(T, x);
  case BS:
    return bs_find(x);
  case RB:
    return rb_find(rb_root, x);
  default:
    return splay_find(x);
  }
}

/* ns per lookup of `m` over queries q[0..n), best of REPS. Throughput (latency == 0): the
 * lookups are independent. Latency: each address depends on the previous result (last >> 63
 * is 0 for a hit and every query hits, but the CPU cannot know that), so nothing overlaps.
 * Two loops, not one with a select: a select would make the throughput loop dependent too. */
static double time_find(enum method m, const int64_t *q, size_t n, int latency, int64_t *out) {
  double best = 1e30;
  for (int rep = 0; rep < REPS; rep++) {
    int64_t sum = 0, last = 0;
    double t0 = now_ns();
    if (m == OFL_MANY) {
      ofl_table_find_many(T, q, n, 0, out);
      sum = out[n - 1];
    } else if (latency) {
      for (size_t i = 0; i < n; i++) {
        last = find_with(m, q[i] + (last >> 63));
        sum += last;
      }
    } else {
      for (size_t i = 0; i < n; i++)
        out[i] = find_with(m, q[i]);
      sum = out[n - 1];
    }
    double dt = now_ns() - t0;
    sink = sum;
    if (dt < best)
      best = dt;
  }
  return best / (double)n;
}

static double time_lookup(int tree, const char **names, const size_t *lens, size_t n,
                          int64_t *out) {
  double best = 1e30;
  for (int rep = 0; rep < REPS; rep++) {
    int64_t sum = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
      int64_t r;
      if (tree) {
        struct named key = {names[i], 0};
        void *hit = tfind(&key, &rb_names, named_cmp);
        r = hit ? (*(struct named **)hit)->row : -1;
      } else {
        r = ofl_table_lookup(T, names[i], lens[i]);
      }
      sum += r;
      if (out)
        out[i] = r;
    }
    double dt = now_ns() - t0;
    sink = sum;
    if (dt < best)
      best = dt;
  }
  return best / (double)n;
}

static void same(const char *what, const int64_t *a, const int64_t *b, size_t n) {
  if (memcmp(a, b, n * sizeof *a) != 0) {
    fprintf(stderr, "bench: %s disagrees with ofl_table_find\n", what);
    exit(1);
  }
}

/* The machine's memory latency, for reading the figures: ns per dependent load in a random
 * cyclic chain over `mib` MiB (one load per 64-byte line). */
static double memory_latency(size_t mib) {
  const size_t lines = (mib << 20) / 64;
  uint64_t *a = aligned_alloc(64, lines * 64);
  size_t *perm = malloc(lines * sizeof *perm);
  for (size_t i = 0; i < lines; i++)
    perm[i] = i;
  for (size_t i = lines - 1; i > 0; i--) {
    size_t j = rng() % (i + 1), tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
  }
  for (size_t i = 0; i < lines; i++)
    a[perm[i] * 8] = perm[(i + 1) % lines] * 8;
  double best = 1e30;
  const size_t steps = 1 << 21;
  for (int rep = 0; rep < 3; rep++) {
    uint64_t p = perm[0] * 8;
    double t0 = now_ns();
    for (size_t i = 0; i < steps; i++)
      p = a[p];
    double dt = now_ns() - t0;
    sink = (int64_t)p;
    if (dt < best)
      best = dt;
  }
  free(a);
  free(perm);
  return best / (double)steps;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--memory-latency") == 0) {
    printf("memory latency (ns per dependent load):");
    for (size_t mib = 1; mib <= 64; mib *= 4)
      printf(" %zu MiB %.1f;", mib, memory_latency(mib));
    printf("\n");
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: bench TABLE_FILE [QUERIES] | bench --memory-latency\n");
    return 2;
  }
  size_t nq = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (size_t)1 << 20;
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  size_t size = (size_t)ftell(f);
  rewind(f);
  /* 64-aligned, as the section is in a module. */
  unsigned char *buf = aligned_alloc(64, (size + 63) / 64 * 64);
  if (fread(buf, 1, size, f) != size)
    return 1;
  fclose(f);

  static ofl_table table;
  double open_ns = 1e30, crc_ns = 1e30;
  for (int rep = 0; rep < REPS; rep++) {
    double t0 = now_ns();
    int st = ofl_table_open(&table, buf, size);
    double dt = now_ns() - t0;
    if (st != OFL_OK) {
      fprintf(stderr, "bench: %s: %s\n", argv[1], ofl_status_message(st));
      return 1;
    }
    if (dt < open_ns)
      open_ns = dt;
    t0 = now_ns();
    sink = ofl_crc32(0, buf, table.meta_size);
    dt = now_ns() - t0;
    if (dt < crc_ns)
      crc_ns = dt;
  }
  T = &table;
  const size_t n = table.n_symbols;

  /* Baselines built from the same rows (this is the work a runtime without the index does). */
  struct range *ranges = malloc(n * sizeof *ranges);
  struct snode *snodes = malloc(n * sizeof *snodes);
  struct named *named = malloc(n * sizeof *named);
  bs_start = malloc(n * sizeof *bs_start);
  bs_size = malloc(n * sizeof *bs_size);
  bs_row = malloc(n * sizeof *bs_row);
  bs_n = n;
  size_t n_var = 0;
  for (size_t r = 0; r < n; r++) {
    ofl_symbol s;
    ofl_table_symbol(T, (uint32_t)r, &s);
    ranges[r] = (struct range){s.host_offset, s.size, (int64_t)r};
    named[r] = (struct named){s.name, (int64_t)r};
    n_var += s.size > 1;
  }
  double sort_t0 = now_ns();
  qsort(ranges, n, sizeof *ranges, range_by_start);
  double sort_ns = now_ns() - sort_t0;
  for (size_t i = 0; i < n; i++) {
    bs_start[i] = ranges[i].start;
    bs_size[i] = ranges[i].size;
    bs_row[i] = ranges[i].row;
    snodes[i] = (struct snode){ranges[i], NULL, NULL};
    tsearch(&ranges[i], &rb_root, range_cmp);
    tsearch(&named[i], &rb_names, named_cmp);
  }
  splay_root = splay_build(snodes, 0, n);

  /* Queries: random rows' start addresses; random interior addresses of variables; names. */
  int64_t *exact = malloc(nq * sizeof *exact), *inner = malloc(nq * sizeof *inner);
  const char **names = malloc(nq * sizeof *names);
  size_t *lens = malloc(nq * sizeof *lens);
  size_t *var_rows = malloc((n_var ? n_var : 1) * sizeof *var_rows), k = 0;
  for (size_t r = 0; r < n; r++)
    if (ranges[r].size > 1)
      var_rows[k++] = r;
  for (size_t i = 0; i < nq; i++) {
    exact[i] = ranges[rng() % n].start;
    const struct range *v = &ranges[n_var ? var_rows[rng() % n_var] : rng() % n];
    inner[i] = v->size > 1 ? v->start + 1 + (int64_t)(rng() % (v->size - 1)) : v->start;
    ofl_symbol s;
    ofl_table_symbol(T, (uint32_t)(rng() % n), &s);
    names[i] = s.name;
    lens[i] = s.name_len;
  }

  int64_t *want = malloc(nq * sizeof *want), *got = malloc(nq * sizeof *got);
  struct {
    const char *label;
    const int64_t *q;
  } kinds[] = {{"exact", exact}, {"interior", inner}};
  printf("table %s: %zu symbols, %" PRIu64 " bytes (metadata %" PRIu64 "), %zu queries\n",
         argv[1], n, table.total_size, table.meta_size, nq);
  printf("open: %.3f ms (of which CRC-32 of the metadata %.3f ms); "
         "a runtime building its own sorted array would first sort: %.3f ms\n",
         open_ns / 1e6, crc_ns / 1e6, sort_ns / 1e6);
  printf("%-9s %-8s %8s %8s %8s %8s %8s\n", "lookup", "ns/op", "offlink", "batch", "bsearch",
         "rbtree", "splay");
  for (size_t kk = 0; kk < 2; kk++) {
    const int64_t *q = kinds[kk].q;
    double thr_ofl = time_find(OFL, q, nq, 0, want);
    double thr_many = time_find(OFL_MANY, q, nq, 0, got);
    same("ofl_table_find_many", want, got, nq);
    double thr_bs = time_find(BS, q, nq, 0, got);
    same("binary search", want, got, nq);
    double thr_rb = time_find(RB, q, nq, 0, got);
    same("rbtree", want, got, nq);
    double thr_sp = time_find(SPLAY, q, nq, 0, got);
    same("splay", want, got, nq);
    printf("%-9s %-8s %8.1f %8.1f %8.1f %8.1f %8.1f\n", kinds[kk].label, "thr", thr_ofl,
           thr_many, thr_bs, thr_rb, thr_sp);
    printf("%-9s %-8s %8.1f %8s %8.1f %8.1f %8.1f\n", kinds[kk].label, "lat",
           time_find(OFL, q, nq, 1, got), "-", time_find(BS, q, nq, 1, got),
           time_find(RB, q, nq, 1, got), time_find(SPLAY, q, nq, 1, got));
  }
  double name_ofl = time_lookup(0, names, lens, nq, want);
  double name_rb = time_lookup(1, names, lens, nq, got);
  same("name rbtree", want, got, nq);
  printf("%-9s %-8s %8.1f %8s %8s %8.1f %8s\n", "name", "thr", name_ofl, "-", "-", name_rb,
         "-");
  return 0;
}
