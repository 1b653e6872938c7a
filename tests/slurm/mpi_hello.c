// An MPI job in its smallest form, for the harness: every rank reports its rank, the job size,
// where it runs and the CPUs it may use, and an allreduce checks the ranks really talk.
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double mine = rank + 1;
  double sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  char cpus[256] = "?";
  FILE* status = fopen("/proc/self/status", "r");
  for (char line[512]; status != NULL && fgets(line, sizeof line, status) != NULL;) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      sscanf(line + 18, "%255s", cpus);
      break;
    }
  }
  if (status != NULL) fclose(status);
  const char* node = getenv("SLURMD_NODENAME");
  printf("rank=%d size=%d sum=%g node=%s cpus=%s\n", rank, size, sum, node ? node : "?", cpus);
  MPI_Finalize();
  return 0;
}
