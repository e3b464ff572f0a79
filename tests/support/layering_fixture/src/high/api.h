#include "mid/mid.h"
#include "other/unknown.h"  // not a component: ignored
