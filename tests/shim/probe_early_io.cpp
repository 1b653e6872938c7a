// Prints what early_io.cpp's constructor (run before the shim's) could do: "ofstream=ok listed=1".
#include <cstdio>

const char* early_io_result();

int main() {
  std::printf("%s\n", early_io_result());
  return 0;
}
