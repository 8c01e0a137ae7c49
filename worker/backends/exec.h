/* The exec backend: an external harness process as the device, spoken to over its
 * stdin/stdout with the framed protocol of docs/EXEC_PROTOCOL.md. The option text
 * (after "exec:") is the command line, run through /bin/sh. One harness process per
 * context; a harness that dies, hangs or talks nonsense errors the call (with its
 * stderr tail in the message) and is replaced by a fresh one on the next call. */
#ifndef NUMVAL_WORKER_EXEC_H
#define NUMVAL_WORKER_EXEC_H

#include "numval/backend.h"

#define NVW_EXEC_PROTOCOL 1

/* The exec backend's table (static storage). */
const nv_backend *nvw_exec_table(void);

#endif
