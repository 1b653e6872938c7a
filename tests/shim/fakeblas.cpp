// A stand-in for OpenBLAS / MKL thread setters: records what it was asked for, so the tests can
// see what a real BLAS would receive through the shim. MKL's lowercase symbols are its Fortran
// entry points and take the count by reference, as in libmkl_rt.
extern "C" {
static int last_openblas = -1, last_goto = -1, last_mkl_value = -1, last_mkl_ref = -1,
           last_mkl_fortran = -1;
__attribute__((visibility("default"))) void openblas_set_num_threads(int n) { last_openblas = n; }
__attribute__((visibility("default"))) void goto_set_num_threads(int n) { last_goto = n; }
__attribute__((visibility("default"))) void MKL_Set_Num_Threads(int n) { last_mkl_value = n; }
__attribute__((visibility("default"))) void mkl_set_num_threads(const int* n) { last_mkl_ref = *n; }
__attribute__((visibility("default"))) void mkl_set_num_threads_(const int* n) {
  last_mkl_fortran = *n;
}
__attribute__((visibility("default"))) int fakeblas_last(int which) {
  switch (which) {
    case 0:
      return last_openblas;
    case 1:
      return last_goto;
    case 2:
      return last_mkl_value;
    case 3:
      return last_mkl_ref;
    default:
      return last_mkl_fortran;
  }
}
}
