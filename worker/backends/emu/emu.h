/* emu: the emulated accelerator, a backend implementing include/numval/backend.h on
 * the CPU with a declared numerical mode (docs/BACKEND_ABI.md, "The emu device").
 * Its option text is the mode: "storage=bf16,accum=fp32,reduce=tree:64,...". */
#ifndef NUMVAL_WORKER_EMU_H
#define NUMVAL_WORKER_EMU_H

#include "numval/backend.h"

/* The emu's backend table (static, never freed). */
const nv_backend *nvw_emu_backend(void);

#endif
