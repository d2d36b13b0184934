// Status and Result<T> (include/llamay/status.h, part of the public API), and the CHECK macros the
// library's code uses beside them.
#ifndef LLAMAY_BASE_STATUS_H_
#define LLAMAY_BASE_STATUS_H_

#include "base/check.h"
#include "llamay/status.h"

#endif  // LLAMAY_BASE_STATUS_H_
