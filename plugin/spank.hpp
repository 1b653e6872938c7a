// spank.h declares the hooks without extern "C" (it is a C header); wrap it so the declarations and
// our definitions agree on C linkage.
#pragma once

extern "C" {
#include <slurm/spank.h>
}
