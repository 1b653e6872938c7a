// shim-probe-blas: a program linked against a BLAS (the fake one): what the BLAS receives when the
// program asks for 64 threads through each setter.
#include <cstdio>

extern "C" {
void openblas_set_num_threads(int n);
void goto_set_num_threads(int n);
void MKL_Set_Num_Threads(int n);
void mkl_set_num_threads(const int* n);
void mkl_set_num_threads_(const int* n);
int fakeblas_last(int which);
}

int main() {
  int n = 64;  // not const: a const int is folded into printf, hiding a setter that writes it
  openblas_set_num_threads(n);
  goto_set_num_threads(n);
  MKL_Set_Num_Threads(n);
  mkl_set_num_threads(&n);
  mkl_set_num_threads_(&n);
  std::printf(
      "{\"openblas\":%d,\"goto\":%d,\"MKL_Set_Num_Threads\":%d,\"mkl_set_num_threads\":%d,"
      "\"mkl_set_num_threads_\":%d,\"caller_value_kept\":%d}\n",
      fakeblas_last(0), fakeblas_last(1), fakeblas_last(2), fakeblas_last(3), fakeblas_last(4), n);
  return 0;
}
