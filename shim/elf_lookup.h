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

// Where the dynamic linker would have bound the call at `ra` to `name`: the calling object's own
// scope (itself, then its DT_NEEDED libraries in order), else the first object in load order
// that defines it. The object loaded at `skip_base` (the shim) is never the answer. NULL: none.
void* elf_find_definition(const char* name, const void* ra, uintptr_t skip_base);

// Changes whenever an object is unloaded (dlpi_subs): answers cached before are stale.
unsigned long long elf_unload_generation(void);

#pragma GCC visibility pop
