/* Agent mode: claim jobs for one device from numvald over HTTP, run them, report. */
#ifndef NUMVAL_WORKER_AGENT_H
#define NUMVAL_WORKER_AGENT_H

/* argv after the program name: --server URL --token T --device NAME --backend SPEC
 * [--threads N] [--once]. Returns the process exit status. */
int nvw_agent_main(int argc, char **argv);

#endif
