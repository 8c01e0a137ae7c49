/* `numval-worker repro ARTIFACT` and `numval-worker minimize ARTIFACT`
 * (docs/ARTIFACTS.md "Reproduction"): argv after the subcommand's name; returns
 * the process exit status (worker/repro/cmd.h). */
#ifndef NUMVAL_WORKER_REPRO_CMD_H_
#define NUMVAL_WORKER_REPRO_CMD_H_

int nvw_repro_main(int argc, char **argv);
int nvw_minimize_main(int argc, char **argv);

#endif
