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
  const int64_t *keys;           /* address index keys, Eytzinger order (may be unaligned-safe copy-free: see table.c) */
  const unsigned char *index_rows; /* n_symbols x u32 */
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

void ofl_table_symbol(const ofl_table *t, uint32_t row, ofl_symbol *out);
void ofl_table_target(const ofl_table *t, uint32_t index, ofl_target *out);

/* Row of `name` (length `len`), or -1. Binary search over the name-sorted rows. */
int64_t ofl_table_lookup(const ofl_table *t, const char *name, size_t len);

/* Row whose [host_offset, host_offset + size) contains `offset` (an address relative to the
 * table), or -1. Eytzinger search of the address index. */
int64_t ofl_table_find(const ofl_table *t, int64_t offset);

/* Index of the target named `name`, or -1. */
int64_t ofl_table_target_index(const ofl_table *t, const char *name, size_t len);

/* Check a target's image CRC-32: OFL_OK or OFL_BAD_IMAGE_CHECKSUM. */
int ofl_table_check_image(const ofl_table *t, uint32_t index);

uint32_t ofl_crc32(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
