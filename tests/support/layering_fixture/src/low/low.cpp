#include "high/api.h"  // low must not use high
