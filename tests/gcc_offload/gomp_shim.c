/* LD_PRELOAD shim for tests/test_gcc_offload.py, tests/test_gcc_amdgcn.py and
   tests/test_gcc_later.py: records every
   GOMP_offload_register_ver and GOMP_offload_unregister_ver call to $GOMP_SHIM_LOG (the
   nvptx_tdata of type 5 in the layout of the call's GOMP_VERSION: GCC 12's for 1, with
   omp_requires_mask first for 2+, with ind_fn_num last and a six-word host table (indirect
   functions) for 3+, as mkoffload writes them; GCC 12's gcn_image_desc for type 8 (GCN)),
   the PTX objects to $GOMP_SHIM_LOG.ptx or the GCN code object to $GOMP_SHIM_LOG.gcn, then
   calls libgomp's own. Host addresses are written relative to
   the module's load address (a PIE's link-time addresses). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptx_obj { const char *code; size_t size; };
struct nvptx_fn { const char *name; unsigned short dim[3]; };
struct nvptx_tdata {
  const struct ptx_obj *ptx_objs;
  unsigned ptx_num;
  const char *const *var_names;
  unsigned var_num;
  const struct nvptx_fn *fn_names;
  unsigned fn_num;
};
/* GOMP_VERSION 2 (GCC 13) puts the mask first; 3 (GCC 14-16) adds ind_fn_num at the end
   (right after fn_num: one flat struct, as mkoffload writes it). */
struct nvptx_tdata3 {
  uintptr_t omp_requires_mask;
  const struct ptx_obj *ptx_objs;
  unsigned ptx_num;
  const char *const *var_names;
  unsigned var_num;
  const struct nvptx_fn *fn_names;
  unsigned fn_num;
  unsigned ind_fn_num;
};

/* gcn/mkoffload.cc (GCC 12): the registration's target_data for GOMP_DEVICE_GCN. */
#define GOMP_DEVICE_GCN 8
struct gcn_image { size_t size; void *image; };
struct hsa_kernel_description {
  const char *name;
  int oacc_dims[3];
  int sgpr_count;
  int vgpr_count;
};
struct gcn_image_desc {
  const struct gcn_image *gcn_image;
  unsigned kernel_count;
  const struct hsa_kernel_description *kernel_infos;
  unsigned global_variable_count;
};
/* GCC 14-16 (GOMP_VERSION 3): gcn_data, the mask first and the indirect functions' count. */
struct gcn_data3 {
  uintptr_t omp_requires_mask;
  const struct gcn_image *gcn_image;
  unsigned kernel_count;
  const struct hsa_kernel_description *kernel_infos;
  unsigned ind_func_count;
  unsigned global_variable_count;
};

/* Where the device code goes: $GOMP_SHIM_LOG.SUFFIX, opened for writing (NULL: not). */
static FILE *open_dump(const char *path, const char *suffix) {
  char out[4096];
  snprintf(out, sizeof out, "%s.%s", path, suffix);
  return fopen(out, "wb");
}

/* The host table (GOMP_offload_register_ver's): functions, variables (address and size),
   and from GOMP_VERSION 3 on indirect functions, each a [start, end) pair of pointers. */
struct host_counts { uintptr_t funcs, vars, inds; };

static struct host_counts host_counts(void *const *const *t, unsigned version) {
  return (struct host_counts) {(uintptr_t) (t[1] - t[0]), (uintptr_t) (t[3] - t[2]) / 2,
                               version >> 16 >= 3 ? (uintptr_t) (t[5] - t[4]) : 0};
}

static void print_indirect(FILE *f, void *const *const *t, struct host_counts n,
                           uintptr_t base) {
  for (uintptr_t i = 0; i < n.inds; i++)
    fprintf(f, "ind %lu\n", (unsigned long) ((uintptr_t) t[4][i] - base));
}

/* GCN: the kernels by name (mkoffload's order; libgomp's plugin skips _init_array and
   _fini_array and pairs the rest with the host's function slots in order); the variables
   have no names here (the plugin reads the image's `.offload_var_table`), only a count. */
static void record_gcn(FILE *f, const char *what, const char *path, unsigned version, int type,
                       void *const *const *t, uintptr_t base, const void *target_data) {
  struct host_counts n = host_counts(t, version);
  struct gcn_image_desc view;
  const struct gcn_image_desc *d = target_data;
  const struct gcn_data3 *d3 = target_data;
  if (version >> 16 >= 3) {
    view = (struct gcn_image_desc) {d3->gcn_image, d3->kernel_count, d3->kernel_infos,
                                    d3->global_variable_count};
    d = &view;
  }
  fprintf(f, "%s %#x %d gcn %lu kernels %u/%lu vars %u/%lu", what, version, type,
          (unsigned long) d->gcn_image->size, d->kernel_count, (unsigned long) n.funcs,
          d->global_variable_count, (unsigned long) n.vars);
  if (version >> 16 >= 3)
    fprintf(f, " mask %#lx ind %u/%lu", (unsigned long) d3->omp_requires_mask,
            d3->ind_func_count, (unsigned long) n.inds);
  fputc('\n', f);
  print_indirect(f, t, n, base);
  for (unsigned i = 0; i < d->kernel_count; i++)
    fprintf(f, "kernel %s %d %d %d sgpr %d vgpr %d\n", d->kernel_infos[i].name,
            d->kernel_infos[i].oacc_dims[0], d->kernel_infos[i].oacc_dims[1],
            d->kernel_infos[i].oacc_dims[2], d->kernel_infos[i].sgpr_count,
            d->kernel_infos[i].vgpr_count);
  for (unsigned i = 0; i < n.funcs; i++)
    fprintf(f, "func %lu\n", (unsigned long) ((uintptr_t) t[0][i] - base));
  for (unsigned i = 0; i < n.vars; i++)
    fprintf(f, "var %lu %lu\n", (unsigned long) ((uintptr_t) t[2][2 * i] - base),
            (unsigned long) (uintptr_t) t[2][2 * i + 1]);
  FILE *p = strcmp(what, "register") == 0 ? open_dump(path, "gcn") : NULL;
  if (p) {
    fwrite(d->gcn_image->image, 1, d->gcn_image->size, p);
    fclose(p);
  }
}

typedef void (*gomp_fn)(unsigned, const void *, int, const void *);

static void record(const char *what, unsigned version, const void *host_table, int type,
                   const void *target_data) {
  const char *path = getenv("GOMP_SHIM_LOG");
  if (!path)
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  Dl_info info;
  uintptr_t base = 0;
  if (dladdr(host_table, &info) && info.dli_fbase)
    base = (uintptr_t) info.dli_fbase;
  void *const *const *t = host_table;
  if (type == GOMP_DEVICE_GCN) {
    record_gcn(f, what, path, version, type, t, base, target_data);
    fclose(f);
    return;
  }
  const struct nvptx_tdata *d = target_data;
  const struct nvptx_tdata3 *d3 = target_data;
  unsigned gomp_version = version >> 16;
  struct nvptx_tdata later;
  if (gomp_version >= 2) {
    later = (struct nvptx_tdata) {d3->ptx_objs, d3->ptx_num, d3->var_names, d3->var_num,
                                  d3->fn_names, d3->fn_num};
    d = &later;
  }
  struct host_counts n = host_counts(t, version);
  fprintf(f, "%s %#x %d ptx %u funcs %u/%lu vars %u/%lu", what, version, type, d->ptx_num,
          d->fn_num, (unsigned long) n.funcs, d->var_num, (unsigned long) n.vars);
  if (gomp_version >= 2)
    fprintf(f, " mask %#lx", (unsigned long) d3->omp_requires_mask);
  if (gomp_version >= 3)
    fprintf(f, " ind %u/%lu", d3->ind_fn_num, (unsigned long) n.inds);
  fputc('\n', f);
  print_indirect(f, t, n, base);
  for (unsigned i = 0; i < d->fn_num && i < n.funcs; i++)
    fprintf(f, "func %s %lu %u %u %u\n", d->fn_names[i].name,
            (unsigned long) ((uintptr_t) t[0][i] - base), d->fn_names[i].dim[0],
            d->fn_names[i].dim[1], d->fn_names[i].dim[2]);
  for (unsigned i = 0; i < d->var_num && i < n.vars; i++)
    fprintf(f, "var %s %lu %lu\n", d->var_names[i],
            (unsigned long) ((uintptr_t) t[2][2 * i] - base),
            (unsigned long) (uintptr_t) t[2][2 * i + 1]);
  fclose(f);
  FILE *p = strcmp(what, "register") == 0 ? open_dump(path, "ptx") : NULL;
  if (p) {
    for (unsigned i = 0; i < d->ptx_num; i++)
      fwrite(d->ptx_objs[i].code, 1, d->ptx_objs[i].size, p);
    fclose(p);
  }
}

void GOMP_offload_register_ver(unsigned version, const void *host_table, int type,
                               const void *target_data) {
  record("register", version, host_table, type, target_data);
  gomp_fn real = (gomp_fn) dlsym(RTLD_NEXT, "GOMP_offload_register_ver");
  if (real)
    real(version, host_table, type, target_data);
}

void GOMP_offload_unregister_ver(unsigned version, const void *host_table, int type,
                                 const void *target_data) {
  record("unregister", version, host_table, type, target_data);
  gomp_fn real = (gomp_fn) dlsym(RTLD_NEXT, "GOMP_offload_unregister_ver");
  if (real)
    real(version, host_table, type, target_data);
}
