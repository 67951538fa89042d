/* offlink runtime: the registry, one record per module's offload table, each module set up
 * on first use (API and environment: offlink.h; table format: formats/table.md).
 *
 * Every module that links this library registers its own table from a constructor and
 * unregisters it from a destructor (as libomptarget's __tgt_register_lib and
 * __tgt_unregister_lib do), so a dlclose()d library's record and image are freed and a
 * library later loaded at the same address starts afresh.  A table first seen through the
 * API (a module that reaches another module's copy of the runtime) is registered then.
 *
 * Records live in an append-only list walked with acquire loads; a dead record (its module
 * unregistered) is reused.  Setting a module up (runtime_setup.c) builds a private
 * `struct module` with no lock held, and publishes it with one store: the image loaders take
 * the dynamic loader's lock, and a thread that holds that lock (a constructor run by dlopen)
 * may use the same module.  A thread that finds another one setting the module up waits for
 * it a short while, then sets it up itself; the first result published wins and the others
 * are unloaded. */

#define _GNU_SOURCE
#include "offlink.h"
#include "runtime_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How long a thread waits for another one's setup of the same module before it sets the
 * module up itself (the other may be blocked on the dynamic loader's lock, held by this one). */
#define SETUP_WAIT_NS 100000000L

/* A registered table.  `table` NULL: the record is dead (its module unregistered) and may be
 * reused; `generation` changes at each death, so a setup that started before it is dropped. */
struct record {
  _Atomic(const unsigned char *) table;
  struct record *next; /* immutable once published */
  atomic_uint generation;
  _Atomic(struct module *) ready;
  atomic_int setting; /* a thread is setting the module up */
  /* Registered lazily (first seen through the API, no constructor): its key also holds
   * total_size and meta_crc32, to tell it from another module's later loaded there.  Each
   * use reads the key with no lock; it is written under registry_lock. */
  atomic_int lazy;
  _Atomic(uint64_t) key_total;
  _Atomic(uint32_t) key_crc;
  pthread_mutex_t lock; /* guards publishing; never held across the loader */
  pthread_cond_t done;
};

static _Atomic(struct record *) records;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* The records this thread is setting up (an image constructor may come back here). */
struct busy {
  const struct record *rec;
  struct busy *outer;
};
static _Thread_local struct busy *setting_up;

static struct record *find_record(const unsigned char *table) {
  for (struct record *r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next)
    if (atomic_load_explicit(&r->table, memory_order_acquire) == table)
      return r;
  return NULL;
}

/* A record for `table`: a dead one reused, or a new one.  Called with registry_lock held. */
static struct record *new_record(const unsigned char *table, int lazy, uint64_t total,
                                 uint32_t crc) {
  struct record *r;
  for (r = atomic_load_explicit(&records, memory_order_acquire); r; r = r->next)
    if (!atomic_load_explicit(&r->table, memory_order_relaxed))
      break;
  if (!r) {
    if (!(r = calloc(1, sizeof *r)))
      return NULL;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->done, NULL);
    r->next = atomic_load_explicit(&records, memory_order_relaxed);
    atomic_store_explicit(&records, r, memory_order_release);
  }
  atomic_store(&r->lazy, lazy);
  atomic_store(&r->key_total, total);
  atomic_store(&r->key_crc, crc);
  atomic_store_explicit(&r->table, table, memory_order_release);
  return r;
}

/* A module's constructor (every module that links this library has one, below). */
void __offlink_register_module(const void *table) {
  ofl_read_env();
  if (!table)
    return;
  pthread_mutex_lock(&registry_lock);
  struct record *r = find_record(table);
  if (r)
    atomic_store(&r->lazy, 0); /* first seen through the API before its constructor ran */
  else
    new_record(table, 0, 0, 0);
  pthread_mutex_unlock(&registry_lock);
}

/* A module's destructor: forget its table and unload its image, so that nothing answers for
 * a module no longer there.  Not while the process exits (other threads may still run). */
void __offlink_unregister_module(const void *table) {
  /* At exit the record stays: a later destructor or exit handler may still use the table. */
  if (!table || ofl_process_exiting())
    return;
  pthread_mutex_lock(&registry_lock);
  struct record *r = find_record(table);
  struct module *m = NULL;
  if (r) {
    pthread_mutex_lock(&r->lock);
    atomic_fetch_add(&r->generation, 1);
    m = atomic_exchange(&r->ready, NULL);
    atomic_store(&r->setting, 0);
    atomic_store_explicit(&r->table, NULL, memory_order_release);
    pthread_mutex_unlock(&r->lock);
  }
  pthread_mutex_unlock(&registry_lock);
  ofl_discard(m); /* no runtime lock held: unloading runs the image's destructors */
}

static const unsigned char *key_of(const unsigned char *table, uint64_t *total, uint32_t *crc) {
  /* Read only once the bytes are known to be mapped, up to the end of meta_crc32. */
  if (ofl_locate(table, NULL) < OFL_HDR_META_CRC32 + 4)
    return NULL;
  *total = ofl_le(table + OFL_HDR_TOTAL_SIZE, 8);
  *crc = (uint32_t)ofl_le(table + OFL_HDR_META_CRC32, 4);
  return table;
}

/* The record of `table`, registered now if its module has no constructor of ours. */
static struct record *record_of(const unsigned char *table) {
  struct record *r = find_record(table);
  uint64_t total = 0;
  uint32_t crc = 0;
  if (r && !atomic_load(&r->lazy))
    return r;
  if (!key_of(table, &total, &crc)) /* not in any module: a record that says so */
    total = crc = 0;
  if (r && atomic_load(&r->key_total) == total && atomic_load(&r->key_crc) == crc)
    return r;
  pthread_mutex_lock(&registry_lock);
  if (r && atomic_load(&r->table) == table && atomic_load(&r->lazy) &&
      (atomic_load(&r->key_total) != total || atomic_load(&r->key_crc) != crc)) {
    /* Another module's table, now at the address of one that went without a destructor. */
    pthread_mutex_lock(&r->lock);
    atomic_fetch_add(&r->generation, 1);
    atomic_store(&r->ready, NULL); /* its image stays loaded: its module never said */
    atomic_store(&r->setting, 0);
    atomic_store(&r->key_total, total);
    atomic_store(&r->key_crc, crc);
    pthread_mutex_unlock(&r->lock);
  } else if (!(r = find_record(table)))
    r = new_record(table, 1, total, crc);
  pthread_mutex_unlock(&registry_lock);
  if (!r)
    ofl_set_error("out of memory");
  return r;
}

static int is_setting_up(const struct record *r) {
  for (const struct busy *b = setting_up; b; b = b->outer)
    if (b->rec == r)
      return 1;
  return 0;
}

/* The module of `table`, set up; NULL when there is none (no table, out of memory, or this
 * thread is setting it up right now and came back through an image constructor). */
struct module *ofl_module_of(const void *table) {
  if (!table)
    return NULL;
  struct record *r = record_of(table);
  if (!r)
    return NULL;
  struct module *m = atomic_load_explicit(&r->ready, memory_order_acquire);
  if (m)
    return m;
  if (is_setting_up(r))
    return NULL;
  unsigned generation = atomic_load(&r->generation);
  if (atomic_exchange(&r->setting, 1)) {
    /* Another thread sets it up: wait for it, but not for ever (see SETUP_WAIT_NS). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += SETUP_WAIT_NS;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    while (!(m = atomic_load(&r->ready)) && atomic_load(&r->setting) &&
           pthread_cond_timedwait(&r->done, &r->lock, &until) == 0)
      ;
    pthread_mutex_unlock(&r->lock);
    if (m)
      return m;
  }
  struct module *mine = calloc(1, sizeof *mine);
  if (!mine) {
    ofl_set_error("out of memory");
    return NULL;
  }
  mine->table = table;
  struct busy self = {r, setting_up};
  setting_up = &self;
  ofl_setup(mine);
  setting_up = self.outer;
  pthread_mutex_lock(&r->lock);
  m = atomic_load(&r->ready);
  if (!m && atomic_load(&r->generation) == generation && atomic_load(&r->table) == table) {
    atomic_store_explicit(&r->ready, mine, memory_order_release);
    m = mine;
    mine = NULL;
  }
  atomic_store(&r->setting, 0);
  pthread_cond_broadcast(&r->done);
  pthread_mutex_unlock(&r->lock);
  ofl_discard(mine); /* another thread's setup won (or the module went away meanwhile) */
  return m;
}

/* Each module that links this library registers its own table (the hidden __OPENMP_TARGET__
 * of that module) with whichever copy of the runtime the module's calls bind to. */
__attribute__((constructor)) static void register_this_module(void) {
  __offlink_register_module(OFFLINK_TABLE);
}

__attribute__((destructor)) static void unregister_this_module(void) {
  __offlink_unregister_module(OFFLINK_TABLE);
}
