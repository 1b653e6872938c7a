// The shim's reading of the plan hand-over (TFPIN_CPUS, TFPIN_INTEROP, TFPIN_INTRA; see
// tfpin/plan_contract.h): without malloc, stdio or locks, so that it can run in the shim's first
// call, before anything else is ready. Its own file so that tests/fuzz can fuzz it alone and check
// it against lib's decode_plan.
#ifndef TFPIN_SHIM_PLAN_PARSER_H
#define TFPIN_SHIM_PLAN_PARSER_H

#include <stdbool.h>
#include <stdint.h>

#include "tfpin/plan_contract.h"

#ifdef __cplusplus
extern "C" {
#endif

// Fixed-size CPU masks (no CPU_ALLOC) of TFPIN_MAX_CPUS bits, the limit tfpin plans within.
enum { TF_MASK_WORDS = TFPIN_MAX_CPUS / 64 };
#ifdef __cplusplus
static_assert(TFPIN_MAX_CPUS % 64 == 0 && TFPIN_MAX_CPUS <= 65536, "whole words, uint16_t ids");
#else
_Static_assert(TFPIN_MAX_CPUS % 64 == 0 && TFPIN_MAX_CPUS <= 65536, "whole words, uint16_t ids");
#endif
typedef struct {
  uint64_t w[TF_MASK_WORDS];
} tf_mask;

static inline void mask_set(tf_mask* m, unsigned cpu) {
  m->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}
static inline bool mask_has(const tf_mask* m, unsigned cpu) {
  return (m->w[cpu / 64] >> (cpu % 64)) & 1u;
}

typedef struct {
  unsigned ncpus;                 // entries of cpus (= interop * intra when valid)
  unsigned interop, intra;        // M lanes of intra CPUs: lane i = cpus[i*intra .. (i+1)*intra)
  unsigned max_cpu;               // the highest CPU id in the plan
  uint16_t cpus[TFPIN_MAX_CPUS];  // lane order, as TFPIN_CPUS lists them
  tf_mask mask;                   // the same CPUs as a set
} shim_plan;

// Fills `plan` from the three variables' values (NULL = unset). Returns NULL for a consistent plan,
// else a short static reason naming the variable (the plan is then not to be used).
const char* shim_parse_plan(const char* cpus, const char* interop, const char* intra,
                            shim_plan* plan);

#ifdef __cplusplus
}
#endif

#endif  // TFPIN_SHIM_PLAN_PARSER_H
