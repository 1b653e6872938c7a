/* The plan hand-over between tfpin (lib/: encode_plan, decode_plan, export_environment) and the
 * shim. Plain C with no includes: shim/tfpin_shim.c includes it too, so both sides read the same
 * names and limits. docs/design.md "The plan" says what each variable means. */
#ifndef TFPIN_PLAN_CONTRACT_H
#define TFPIN_PLAN_CONTRACT_H

/* The plan: the task's CPUs as a cpulist, lane after lane (lane i = entries i*intra ..
 * (i+1)*intra-1), the number of inter-op lanes (M) and the CPUs of each lane (intra). */
#define TFPIN_VAR_CPUS "TFPIN_CPUS"
#define TFPIN_VAR_INTEROP "TFPIN_INTEROP"
#define TFPIN_VAR_INTRA "TFPIN_INTRA"

/* "0": the shim leaves the CPU files (/sys/devices/system/cpu, /proc/cpuinfo, /proc/stat) as
 * they are; unset or anything else: it serves the plan's view of them (site cpu_files=no,
 * tfpin run --no-cpu-files). */
#define TFPIN_VAR_CPU_FILES "TFPIN_CPU_FILES"

/* The shim's report at exit: TFPIN_REPORT_STDERR or a file path; unset or empty = none. Set by
 * the user, never by tfpin. */
#define TFPIN_VAR_REPORT "TFPIN_REPORT"
#define TFPIN_REPORT_STDERR "stderr"

/* NAME=VALUE;... of what tfpin exported, so that an inner tfpin tells its own values from the
 * user's. The shim does not read it. */
#define TFPIN_VAR_EXPORTED "TFPIN_ENV"

/* The request form of --threads. Never exported (an inner step with fewer cores must not inherit
 * the parent's N as a request); the shim does not read it. */
#define TFPIN_VAR_THREADS "TFPIN_THREADS"

/* The shim's CPU masks are fixed-size: CPU ids 0..TFPIN_MAX_CPUS-1. tfpin refuses to make a plan
 * with a higher id rather than hand over one the shim would ignore. */
#define TFPIN_MAX_CPUS 4096
/* Ids are distinct, so no list, lane count or lane is longer than that. */
#define TFPIN_MAX_LANES TFPIN_MAX_CPUS
#define TFPIN_MAX_INTRA TFPIN_MAX_CPUS

#endif /* TFPIN_PLAN_CONTRACT_H */
