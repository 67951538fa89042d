/* offlink table core: parse, validate and search an `.openmp_target` table (formats/table.md).
 *
 * One C source of truth, compiled into the runtime library (libofflink) and into the Python
 * extension (offlink._ctable). No allocation, no global state, every offset checked against
 * the buffer size before use. */
#ifndef OFFLINK_TABLE_H
#define OFFLINK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OFL_MAGIC "OFFLINK\0"
#define OFL_VERSION 1
#define OFL_HEADER_SIZE 96
#define OFL_TARGET_SIZE 40
#define OFL_SYMBOL_SIZE 32
/* Address index: a static B+ tree of i32 keys (formats/table.md, "Address index"). */
#define OFL_INDEX_FANOUT 16     /* keys per node: 16 x i32 = one 64-byte cache line */
#define OFL_INDEX_NODE_SIZE 64  /* internal node: 16 keys */
#define OFL_INDEX_LEAF_SIZE 192 /* leaf block: 16 keys, then 16 (u32 row, u32 span) entries */
#define OFL_INDEX_MAX_HEIGHT 7  /* internal layers for n_symbols <= 2^32 - 1 */
#define OFL_KEY_MIN (-2147483647 - 1)
#define OFL_KEY_MAX 2147483646 /* host_offset clamped to [OFL_KEY_MIN, OFL_KEY_MAX] */
#define OFL_KEY_PAD 2147483647 /* padding key: above every clamped key and query */
#define OFL_SPAN_MAX UINT32_MAX /* size clamped to 32 bits; this value means "read the row" */
#define OFL_REGION_ALIGN 8
#define OFL_IMAGE_ALIGN 64

/* Field offsets of the on-disk structs. table.c reads fields through these (memcpy loads, so
 * any buffer alignment works); tests/test_ctable.py checks them against the construct
 * declaration in offlink/formats/table.py. */
#define OFL_HDR_MAGIC 0
#define OFL_HDR_VERSION 8
#define OFL_HDR_HEADER_SIZE 10
#define OFL_HDR_FLAGS 12
#define OFL_HDR_TOTAL_SIZE 16
#define OFL_HDR_META_SIZE 24
#define OFL_HDR_META_CRC32 32
#define OFL_HDR_N_TARGETS 36
#define OFL_HDR_N_SYMBOLS 40
#define OFL_HDR_STRINGS_SIZE 44
#define OFL_HDR_TARGETS_OFF 48
#define OFL_HDR_SYMBOLS_OFF 56
#define OFL_HDR_INDEX_OFF 64
#define OFL_HDR_STRINGS_OFF 72

#define OFL_TGT_NAME_OFF 0
#define OFL_TGT_NAME_LEN 4
#define OFL_TGT_KIND 8
#define OFL_TGT_FLAGS 10
#define OFL_TGT_IMAGE_CRC32 12
#define OFL_TGT_IMAGE_OFF 16
#define OFL_TGT_IMAGE_SIZE 24

#define OFL_ROW_NAME_OFF 0
#define OFL_ROW_NAME_LEN 4
#define OFL_ROW_HOST_OFFSET 8
#define OFL_ROW_SIZE 16
#define OFL_ROW_KIND 24
#define OFL_ROW_FLAGS 26

/* Error codes, in the order of the spec's validation steps (formats/table.md). */
enum ofl_status {
  OFL_OK = 0,
  OFL_TRUNCATED = 1,
  OFL_BAD_MAGIC = 2,
  OFL_BAD_VERSION = 3,
  OFL_BAD_HEADER = 4,
  OFL_BAD_CHECKSUM = 5,
  OFL_BAD_OFFSET = 6,
  OFL_BAD_STRING = 7,
  OFL_BAD_KIND = 8,
  OFL_UNSORTED = 9,
  OFL_BAD_INDEX = 10,
  OFL_BAD_IMAGE_CHECKSUM = 11,
};

enum ofl_image_kind {
  OFL_IMAGE_SHARED_OBJECT = 1,
  OFL_IMAGE_CUBIN = 2,
  OFL_IMAGE_FATBIN = 3,
  OFL_IMAGE_PTX = 4,
  OFL_IMAGE_NVPTX_NONE = 5,
  OFL_IMAGE_AMDGCN_AMDHSA = 6,
};

enum ofl_symbol_kind {
  OFL_SYM_FUNCTION = 1,
  OFL_SYM_VARIABLE = 2,
  OFL_SYM_INDIRECT_FUNCTION = 3,
  OFL_SYM_LINK_VARIABLE = 4,
};

/* A validated view of a table; points into the caller's buffer, which must outlive it. */
typedef struct ofl_table {
  const unsigned char *base;
  uint64_t total_size;
  uint64_t meta_size;
  uint32_t n_targets;
  uint32_t n_symbols;
  const unsigned char *targets;  /* n_targets x 40 bytes */
  const unsigned char *symbols;  /* n_symbols x 32 bytes */
  const unsigned char *index;    /* address index */
  uint32_t index_height;         /* internal layers above the leaves (0: one leaf block) */
  /* layer_off[0]: offset of the leaf blocks in the index; layer_off[h]: of internal layer h
   * (layer index_height is the root). */
  uint64_t layer_off[OFL_INDEX_MAX_HEIGHT + 1];
  /* The tree search is exact for offsets in [fast_min, fast_max]; outside it (only when some
   * key was clamped) a binary search on the rows' host_offset answers. */
  int64_t fast_min, fast_max;
  const char *strings;
  uint32_t strings_size;
} ofl_table;

typedef struct ofl_symbol {
  const char *name; /* NUL-terminated, inside the table */
  uint32_t name_len;
  int64_t host_offset; /* host address - table address */
  uint64_t size;
  uint16_t kind;
  uint16_t flags;
} ofl_symbol;

typedef struct ofl_target {
  const char *name;
  uint32_t name_len;
  uint16_t kind;
  uint16_t flags;
  uint32_t image_crc32;
  const unsigned char *image;
  uint64_t image_size;
} ofl_target;

/* Validate `buf` (at least the table's total_size bytes) and fill `t`. Returns an ofl_status. */
int ofl_table_open(ofl_table *t, const void *buf, uint64_t buf_size);

/* A short English message for a status ("bad checksum", ...). */
const char *ofl_status_message(int status);
/* The spec's code for a status ("bad-checksum", ...). */
const char *ofl_status_code(int status);

/* Row `row` / target `index`; out of range gives a zeroed entry with the name "". */
void ofl_table_symbol(const ofl_table *t, uint32_t row, ofl_symbol *out);
void ofl_table_target(const ofl_table *t, uint32_t index, ofl_target *out);

/* Row of `name` (length `len`), or -1. Binary search over the name-sorted rows. */
int64_t ofl_table_lookup(const ofl_table *t, const char *name, size_t len);

/* Row whose [host_offset, host_offset + size) contains `offset` (an address relative to the
 * table), or -1. Search of the address index: one cache line per level, then the leaf's. */
int64_t ofl_table_find(const ofl_table *t, int64_t offset);

/* Row of the last index pair whose key is <= `offset` (the nearest symbol at or below it,
 * whether or not it contains `offset`), or -1 when every key is above `offset`. */
int64_t ofl_table_floor(const ofl_table *t, int64_t offset);

/* Batch ofl_table_find: rows_out[i] = ofl_table_find(t, (int64_t)(addresses[i] - table_address))
 * with the subtraction wrapping modulo 2^64. `addresses` (count native uint64) and `rows_out`
 * (count native int64) may have any alignment. Searches run interleaved, so memory latency
 * overlaps across lookups. */
void ofl_table_find_many(const ofl_table *t, const void *addresses, size_t count,
                         uint64_t table_address, void *rows_out);

/* Index of the target named `name`, or -1. */
int64_t ofl_table_target_index(const ofl_table *t, const char *name, size_t len);

/* Check a target's image CRC-32: OFL_OK or OFL_BAD_IMAGE_CHECKSUM (OFL_BAD_OFFSET for an
 * index out of range). */
int ofl_table_check_image(const ofl_table *t, uint32_t index);

/* CRC-32 (ISO-HDLC, as zlib.crc32): ofl_crc32(0, p, n); chain by passing the previous value. */
/* An n-byte little-endian unsigned field at p (n <= 8), at any alignment on any host: for the
 * few places outside table.c that read a header field or a container by hand. */
static inline uint64_t ofl_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

uint32_t ofl_crc32(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
