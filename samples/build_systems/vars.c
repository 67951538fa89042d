/* A variable offered for offload: the target has its own copy until it is updated. */
#include "bs.h"

int factor = 2;
