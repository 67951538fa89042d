/* libFuzzer harness over the C table core (offlink/runtime/table.c).
 *
 * Every input is opened as is; if that fails only on the checksum, a copy with meta_crc32
 * recomputed is opened too, so mutations get past step 7 and reach the region, name, order
 * and index checks. A table that opens is then used through the whole API, and the answers
 * are checked against plain definitions (linear scans over the index's leaf slots):
 * a wrong answer aborts like a memory error does. Built with ASan and UBSan by run.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond))                                                                                \
      __builtin_trap();                                                                         \
  } while (0)

/* Bound the work per input so the fuzzer keeps its speed on large counts. */
#define MAX_ROWS 512

static uint64_t ld64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v; /* the harness runs on little-endian hosts */
}

static int64_t as_i64(uint64_t v) {
  int64_t s;
  memcpy(&s, &v, 8);
  return s;
}

/* The spec's definition of find, from scratch: the last (key, row) pair in (key, row) order
 * with key <= x, then the containment test. `pairs` are sorted as the writer sorts them. */
struct pair {
  int64_t key;
  uint32_t row;
};

static int64_t reference_floor(const struct pair *pairs, size_t n, int64_t x) {
  int64_t found = -1;
  for (size_t i = 0; i < n && pairs[i].key <= x; i++)
    found = (int64_t)i;
  return found;
}

static int64_t reference_find(const ofl_table *t, const struct pair *pairs, size_t n, int64_t x) {
  int64_t i = reference_floor(pairs, n, x);
  if (i < 0)
    return -1;
  ofl_symbol s;
  ofl_table_symbol(t, pairs[i].row, &s);
  return (uint64_t)x - (uint64_t)s.host_offset < s.size ? (int64_t)pairs[i].row : -1;
}

/* The index's leaf slots in order (valid because open succeeded): each slot's row, keyed by the
 * row's exact host_offset (the leaf key itself may be clamped to 32 bits). */
static size_t sorted_pairs(const ofl_table *t, struct pair *out) {
  const unsigned char *leaves = t->index + t->layer_off[0];
  for (uint64_t p = 0; p < t->n_symbols; p++) {
    const unsigned char *leaf = leaves + p / OFL_INDEX_FANOUT * OFL_INDEX_LEAF_SIZE;
    memcpy(&out[p].row, leaf + 4 * OFL_INDEX_FANOUT + 8 * (p % OFL_INDEX_FANOUT), 4);
    CHECK(out[p].row < t->n_symbols);
    ofl_symbol s;
    ofl_table_symbol(t, out[p].row, &s);
    out[p].key = s.host_offset;
    CHECK(p == 0 || out[p - 1].key <= out[p].key);
  }
  return t->n_symbols;
}

/* A name and its NUL lie inside the string pool (the spec's bad-string check). */
static int in_pool(const ofl_table *t, const char *name, uint32_t len) {
  return name >= t->strings && (uint64_t)len < (uint64_t)(t->strings + t->strings_size - name);
}

static void exercise(const unsigned char *data, size_t size) {
  ofl_table t;
  int status = ofl_table_open(&t, data, size);
  CHECK(ofl_status_code(status) != NULL && ofl_status_message(status) != NULL);
  if (status != OFL_OK) {
    CHECK(t.base == NULL && t.n_symbols == 0); /* nothing half-validated left behind */
    return;
  }
  CHECK(t.total_size <= size && t.meta_size <= t.total_size);

  for (uint32_t i = 0; i < t.n_targets && i < MAX_ROWS; i++) {
    ofl_target g;
    ofl_table_target(&t, i, &g);
    CHECK(in_pool(&t, g.name, g.name_len));
    CHECK(g.name[g.name_len] == '\0' && strlen(g.name) == g.name_len);
    CHECK(g.image >= data + t.meta_size && g.image_size <= (uint64_t)(data + t.total_size - g.image));
    int64_t first = ofl_table_target_index(&t, g.name, g.name_len);
    CHECK(first >= 0 && first <= i);
    int st = ofl_table_check_image(&t, i);
    CHECK(st == OFL_OK || st == OFL_BAD_IMAGE_CHECKSUM);
  }
  CHECK(ofl_table_check_image(&t, t.n_targets) == OFL_BAD_OFFSET);

  if (t.n_symbols > MAX_ROWS)
    return;
  static struct pair pairs[MAX_ROWS];
  const size_t n = sorted_pairs(&t, pairs);
  CHECK(n == t.n_symbols);

  int64_t queries[8 * MAX_ROWS + 4];
  size_t nq = 0;
  queries[nq++] = INT64_MIN;
  queries[nq++] = INT64_MAX;
  queries[nq++] = 0;
  queries[nq++] = -1;
  for (uint32_t r = 0; r < t.n_symbols; r++) {
    ofl_symbol s;
    ofl_table_symbol(&t, r, &s);
    CHECK(in_pool(&t, s.name, s.name_len));
    CHECK(s.name[s.name_len] == '\0' && memchr(s.name, 0, s.name_len) == NULL);
    CHECK(ofl_table_lookup(&t, s.name, s.name_len) == r); /* names are unique and sorted */
    if (s.name_len > 0)
      CHECK(ofl_table_lookup(&t, s.name, s.name_len - 1) != r);
    /* the boundaries of every row, computed without signed overflow */
    const uint64_t start = (uint64_t)s.host_offset;
    const uint64_t marks[] = {start - 1, start, start + 1, start + s.size - 1, start + s.size};
    for (size_t m = 0; m < 5; m++)
      queries[nq++] = as_i64(marks[m]);
  }
  ofl_symbol none;
  ofl_table_symbol(&t, t.n_symbols, &none);
  CHECK(none.name[0] == '\0' && none.size == 0);

  static int64_t batch_out[8 * MAX_ROWS + 4];
  static uint64_t batch_in[8 * MAX_ROWS + 4];
  const uint64_t bias = 0x400000;
  for (size_t q = 0; q < nq; q++) {
    const int64_t want = reference_find(&t, pairs, n, queries[q]);
    CHECK(ofl_table_find(&t, queries[q]) == want);
    const int64_t floor_i = reference_floor(pairs, n, queries[q]);
    CHECK(ofl_table_floor(&t, queries[q]) == (floor_i < 0 ? -1 : (int64_t)pairs[floor_i].row));
    batch_in[q] = (uint64_t)queries[q] + bias;
  }
  ofl_table_find_many(&t, batch_in, nq, bias, batch_out);
  for (size_t q = 0; q < nq; q++)
    CHECK(batch_out[q] == ofl_table_find(&t, queries[q]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  exercise(data, size);

  ofl_table t;
  if (ofl_table_open(&t, data, size) != OFL_BAD_CHECKSUM)
    return 0;
  /* The same bytes with a correct checksum: mutations then reach the later checks. */
  unsigned char *copy = malloc(size);
  if (copy == NULL)
    return 0;
  memcpy(copy, data, size);
  const uint64_t meta = ld64(copy + OFL_HDR_META_SIZE); /* step 6 passed: 96 <= meta <= size */
  memset(copy + OFL_HDR_META_CRC32, 0, 4);
  const uint32_t crc = ofl_crc32(0, copy, (size_t)meta);
  memcpy(copy + OFL_HDR_META_CRC32, &crc, 4);
  exercise(copy, size);
  free(copy);
  return 0;
}
