// ELF symbol lookup for the shim (elf_lookup.h): mechanism only, no shim state.
//
// dlsym/dladdr/dlopen take the loader lock, which dlopen holds while it runs constructors: a
// constructor that waits for a thread calling into OpenMP would deadlock on it. After init the
// shim therefore reads the loaded objects' own dynamic symbol tables, found with dl_iterate_phdr
// (which only takes the short-held lock of the object list).
#define _GNU_SOURCE
#include "elf_lookup.h"

#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static int subs_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  *(unsigned long long*)data = info->dlpi_subs;
  return 1;  // the first object is enough: dlpi_subs is global
}
unsigned long long elf_unload_generation(void) {
  unsigned long long subs = 0;
  dl_iterate_phdr(subs_cb, &subs);
  return subs;
}

typedef struct {
  uintptr_t base;
  const ElfW(Sym) * symtab;
  const char* strtab;
  const uint32_t* gnu_hash;
  const uint32_t* sysv_hash;
  const ElfW(Half) * versym;
  const ElfW(Dyn) * dynamic;
  const char* soname;
} elf_view;

// glibc relocates the pointers in a writable .dynamic in place; the vDSO's are offsets.
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) v) {
  return (uintptr_t)v < base ? base + (uintptr_t)v : (uintptr_t)v;
}

static bool elf_view_of(const struct dl_phdr_info* info, elf_view* v) {
  memset(v, 0, sizeof *v);
  v->base = (uintptr_t)info->dlpi_addr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      v->dynamic = (const ElfW(Dyn)*)(v->base + (uintptr_t)info->dlpi_phdr[i].p_vaddr);
  if (v->dynamic == NULL) return false;
  uintptr_t soname_off = UINTPTR_MAX;
  for (const ElfW(Dyn)* d = v->dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        v->symtab = (const ElfW(Sym)*)dyn_ptr(v->base, d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        v->strtab = (const char*)dyn_ptr(v->base, d->d_un.d_ptr);
        break;
      case DT_GNU_HASH:
        v->gnu_hash = (const uint32_t*)dyn_ptr(v->base, d->d_un.d_ptr);
        break;
      case DT_HASH:
        v->sysv_hash = (const uint32_t*)dyn_ptr(v->base, d->d_un.d_ptr);
        break;
      case DT_VERSYM:
        v->versym = (const ElfW(Half)*)dyn_ptr(v->base, d->d_un.d_ptr);
        break;
      case DT_SONAME:
        soname_off = (uintptr_t)d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (v->symtab == NULL || v->strtab == NULL) return false;
  if (soname_off != UINTPTR_MAX) v->soname = v->strtab + soname_off;
  return v->gnu_hash != NULL || v->sysv_hash != NULL;
}

// A defined, visible function: what the dynamic linker would bind a reference to.
static bool elf_sym_ok(const elf_view* v, uint32_t idx, const char* name) {
  const ElfW(Sym)* sym = &v->symtab[idx];
  if (sym->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym->st_info) != STT_FUNC) return false;
  const unsigned bind = ELF64_ST_BIND(sym->st_info);
  if (bind != STB_GLOBAL && bind != STB_WEAK) return false;
  if (v->versym != NULL && ((v->versym[idx] & 0x8000) != 0 || v->versym[idx] == 0)) return false;
  return strcmp(name, v->strtab + sym->st_name) == 0;
}

static uint32_t gnu_hash_of(const char* s) {
  uint32_t h = 5381;
  for (; *s; ++s) h = h * 33 + (unsigned char)*s;
  return h;
}
static uint32_t sysv_hash_of(const char* s) {
  uint32_t h = 0;
  for (; *s; ++s) {
    h = (h << 4) + (unsigned char)*s;
    const uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

static void* elf_lookup(const elf_view* v, const char* name, uint32_t hg, uint32_t hs) {
  if (v->gnu_hash != NULL) {
    const uint32_t* gh = v->gnu_hash;
    const uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2], shift = gh[3];
    if (nbuckets == 0 || bloom_size == 0) return NULL;
    const ElfW(Addr)* bloom = (const ElfW(Addr)*)(const void*)(gh + 4);
    const uint32_t* buckets = (const uint32_t*)(const void*)(bloom + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    const unsigned bits = (unsigned)sizeof(ElfW(Addr)) * 8u;
    const ElfW(Addr) word = bloom[(hg / bits) % bloom_size];
    const ElfW(Addr) mask =
        ((ElfW(Addr))1 << (hg % bits)) | ((ElfW(Addr))1 << ((hg >> shift) % bits));
    if ((word & mask) != mask) return NULL;
    uint32_t idx = buckets[hg % nbuckets];
    if (idx < symoffset) return NULL;
    for (;; ++idx) {
      const uint32_t h2 = chain[idx - symoffset];
      if ((hg | 1u) == (h2 | 1u) && elf_sym_ok(v, idx, name))
        return (void*)(v->base + (uintptr_t)v->symtab[idx].st_value);
      if (h2 & 1u) return NULL;
    }
  }
  const uint32_t* sh = v->sysv_hash;
  const uint32_t nbucket = sh[0];
  if (nbucket == 0) return NULL;
  const uint32_t* bucket = sh + 2;
  const uint32_t* chain = bucket + nbucket;
  for (uint32_t idx = bucket[hs % nbucket]; idx != 0; idx = chain[idx])
    if (elf_sym_ok(v, idx, name)) return (void*)(v->base + (uintptr_t)v->symtab[idx].st_value);
  return NULL;
}

// The search behind elf_find_definition (elf_lookup.h).
enum { MAX_NEEDED = 64 };
typedef struct {
  const char* name;
  uint32_t hg, hs;
  uintptr_t ra;
  bool caller_found;
  uintptr_t caller_base;
  uintptr_t self_base;
  bool past_self;
  const char* marker;
  uint32_t marker_hg, marker_hs;
  unsigned nneeded;
  const char* needed[MAX_NEEDED];
  void* best;
  unsigned best_rank;  // 0 = the caller, 1 + i = its i-th DT_NEEDED
  void* first_any;
} def_search;

static int find_caller_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  def_search* q = data;
  if (!elf_contains(info, q->ra)) return 0;
  q->caller_found = true;
  q->caller_base = (uintptr_t)info->dlpi_addr;
  elf_view v;
  if (elf_view_of(info, &v)) {
    for (const ElfW(Dyn)* d = v.dynamic; d->d_tag != DT_NULL && q->nneeded < MAX_NEEDED; ++d)
      if (d->d_tag == DT_NEEDED) q->needed[q->nneeded++] = v.strtab + d->d_un.d_val;
  }
  return 1;
}

static int find_definition_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  def_search* q = data;
  const uintptr_t base = (uintptr_t)info->dlpi_addr;
  if (!q->past_self) {  // self and the objects before it are not "next"
    q->past_self = base == q->self_base;
    return 0;
  }
  elf_view v;
  if (!elf_view_of(info, &v)) return 0;
  unsigned rank = UINT32_MAX;
  if (q->caller_found && base == q->caller_base) {
    rank = 0;
  } else {
    const char* file = info->dlpi_name != NULL ? elf_base_name(info->dlpi_name) : "";
    for (unsigned i = 0; i < q->nneeded && rank == UINT32_MAX; ++i)
      if (strcmp(file, q->needed[i]) == 0 ||
          (v.soname != NULL && strcmp(v.soname, q->needed[i]) == 0))
        rank = 1 + i;
  }
  if (rank >= q->best_rank && q->first_any != NULL) return 0;
  void* p = elf_lookup(&v, q->name, q->hg, q->hs);
  if (p == NULL) return 0;
  if (q->marker != NULL && elf_lookup(&v, q->marker, q->marker_hg, q->marker_hs) != NULL)
    return 0;  // a copy of self: it would forward straight back
  if (q->first_any == NULL) q->first_any = p;
  if (rank < q->best_rank) {
    q->best = p;
    q->best_rank = rank;
  }
  return 0;
}

void* elf_find_definition(const char* name, const void* ra, uintptr_t self_base,
                          const char* marker) {
  def_search q;
  memset(&q, 0, sizeof q);
  q.name = name;
  q.hg = gnu_hash_of(name);
  q.hs = sysv_hash_of(name);
  q.ra = (uintptr_t)ra;
  q.self_base = self_base;
  q.marker = marker;
  if (marker != NULL) {
    q.marker_hg = gnu_hash_of(marker);
    q.marker_hs = sysv_hash_of(marker);
  }
  q.best_rank = UINT32_MAX;
  if (ra != NULL) dl_iterate_phdr(find_caller_cb, &q);
  dl_iterate_phdr(find_definition_cb, &q);
  return q.best != NULL ? q.best : q.first_any;
}

// elf_object_defines and elf_defined_before (elf_lookup.h).
typedef struct {
  const char* name;
  uintptr_t where;  // an address in the object (object_defines_cb) or its base (defined_before_cb)
  bool found;
} defines_query;

static bool view_defines(const struct dl_phdr_info* info, const char* name) {
  elf_view v;
  return elf_view_of(info, &v) &&
         elf_lookup(&v, name, gnu_hash_of(name), sysv_hash_of(name)) != NULL;
}

static int object_defines_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  defines_query* q = data;
  if (!elf_contains(info, q->where)) return 0;
  q->found = view_defines(info, q->name);
  return 1;
}
bool elf_object_defines(const void* addr, const char* name) {
  defines_query q = {.name = name, .where = (uintptr_t)addr, .found = false};
  if (addr != NULL) dl_iterate_phdr(object_defines_cb, &q);
  return q.found;
}

static int defined_before_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  defines_query* q = data;
  if ((uintptr_t)info->dlpi_addr == q->where) return 1;
  q->found = view_defines(info, q->name);
  return q->found ? 1 : 0;
}
bool elf_defined_before(const char* name, uintptr_t base) {
  defines_query q = {.name = name, .where = base, .found = false};
  dl_iterate_phdr(defined_before_cb, &q);
  return q.found;
}
