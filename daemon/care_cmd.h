/* `numvald backup FILE` and `numvald prune [--dry-run]`: store care from the
 * command line, beside a running numvald or without one (docs/DEPLOY.md). */
#ifndef NUMVAL_DAEMON_CARE_CMD_H
#define NUMVAL_DAEMON_CARE_CMD_H

#include <stdbool.h>

#include "config.h"

/* Each returns the process exit status (0 done, 1 failed, 2 bad use). */
int nvd_backup_cmd(const nvd_config *cfg, const char *dest);
int nvd_prune_cmd(const nvd_config *cfg, bool dry_run);

#endif
