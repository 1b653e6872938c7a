// Finding a function's definition among the loaded objects without the loader lock: the
// mechanism behind the shim's forwarding (tfpin_shim.c holds the policy). Reads each object's
// dynamic symbol table through dl_iterate_phdr; no malloc, no stdio, no shim state.
#pragma once

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

// Internal to the shim: never exported, called directly.
#pragma GCC visibility push(hidden)

// Does one of the object's loaded segments contain `addr`?
static inline bool elf_contains(const struct dl_phdr_info* info, uintptr_t addr) {
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    const uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (addr >= lo && addr - lo < (uintptr_t)ph->p_memsz) return true;
  }
  return false;
}

static inline const char* elf_base_name(const char* path) {
  const char* base = path;
  for (const char* c = path; *c; ++c)
    if (*c == '/') base = c + 1;
  return base;
}

// Where the dynamic linker would have bound the call at `ra` to `name` without the object loaded
// at `self_base` (the shim): the calling object's own scope (itself, then its DT_NEEDED libraries
// in order), else the first object that defines it. Only objects loaded after self_base count (the
// RTLD_NEXT rule: one before it that defines `name` would have been bound instead, so reaching
// self means it forwards to self), and never one that defines `marker` (a copy of self, which
// would forward back). NULL: none.
void* elf_find_definition(const char* name, const void* ra, uintptr_t self_base,
                          const char* marker);

// Does the loaded object that contains `addr` define `name`?
bool elf_object_defines(const void* addr, const char* name);

// Does an object loaded before the one at `base` define `name`?
bool elf_defined_before(const char* name, uintptr_t base);

// Changes whenever an object is unloaded (dlpi_subs): answers cached before are stale.
unsigned long long elf_unload_generation(void);

#pragma GCC visibility pop
