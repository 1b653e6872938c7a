#include "plan_parser.h"

#include <stddef.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static bool parse_uint(const char* s, unsigned max, unsigned* out) {
  if (s == NULL || *s == '\0') return false;
  unsigned long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (unsigned long)(*s - '0');
    if (v > max) return false;
  }
  *out = (unsigned)v;
  return true;
}

#define NOT_A_CPULIST TFPIN_VAR_CPUS " is not a cpu list like 0-3,8"
#define CPU_TOO_HIGH TFPIN_VAR_CPUS " names a cpu index >= " STR(TFPIN_MAX_CPUS)

// Reads one CPU id at *p; NULL on success, else the reason.
static const char* parse_cpu(const char** p, unsigned* out) {
  if (**p < '0' || **p > '9') return NOT_A_CPULIST;
  unsigned long v = 0;
  while (**p >= '0' && **p <= '9') {
    v = v * 10 + (unsigned long)(*(*p)++ - '0');
    if (v >= TFPIN_MAX_CPUS) return CPU_TOO_HIGH;
  }
  *out = (unsigned)v;
  return NULL;
}

static const char* parse_cpulist(const char* text, shim_plan* plan) {
  if (text == NULL || *text == '\0') return TFPIN_VAR_CPUS " is empty";
  const char* p = text;
  for (;;) {
    unsigned first = 0;
    unsigned last = 0;
    const char* why = parse_cpu(&p, &first);
    if (why != NULL) return why;
    last = first;
    if (*p == '-') {
      ++p;
      why = parse_cpu(&p, &last);
      if (why != NULL) return why;
    }
    const int step = last >= first ? 1 : -1;  // lane order may descend ("3-0")
    for (unsigned cpu = first;; cpu = (unsigned)((int)cpu + step)) {
      if (mask_has(&plan->mask, cpu)) return TFPIN_VAR_CPUS " lists a cpu twice";
      if (plan->ncpus >= TFPIN_MAX_CPUS)
        return TFPIN_VAR_CPUS " lists more than " STR(TFPIN_MAX_CPUS) " cpus";
      mask_set(&plan->mask, cpu);
      plan->cpus[plan->ncpus++] = (uint16_t)cpu;
      if (cpu > plan->max_cpu) plan->max_cpu = cpu;
      if (cpu == last) break;
    }
    if (*p == '\0') return NULL;
    if (*p != ',') return NOT_A_CPULIST;
    ++p;
  }
}

const char* shim_parse_plan(const char* cpus, const char* interop, const char* intra,
                            shim_plan* plan) {
  memset(plan, 0, sizeof *plan);
  const char* why = parse_cpulist(cpus, plan);
  if (why != NULL) return why;
  if (!parse_uint(interop, TFPIN_MAX_LANES, &plan->interop))
    return TFPIN_VAR_INTEROP " is missing or not a positive integer";
  if (!parse_uint(intra, TFPIN_MAX_INTRA, &plan->intra))
    return TFPIN_VAR_INTRA " is missing or not a positive integer";
  if (plan->interop == 0 || plan->intra == 0)
    return TFPIN_VAR_INTEROP " and " TFPIN_VAR_INTRA " must be positive";
  if (plan->interop * plan->intra != plan->ncpus)
    return TFPIN_VAR_CPUS " does not list " TFPIN_VAR_INTEROP " x " TFPIN_VAR_INTRA " cpus";
  return NULL;
}
