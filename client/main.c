/* numvalctl: the numval command-line client. It speaks only the public JSON API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cmd_repro.h"

int nvc_cmd_schedules(nvc_conn *c, int argc, char **argv); /* cmd_schedules.c */
int nvc_cmd_contract(nvc_conn *c, int argc, char **argv);  /* cmd_contract.c */

static const char USAGE[] =
    "usage: numvalctl [--server URL] [--token T] [--cacert FILE] [--json] COMMAND ...\n"
    "\n"
    "  submit JOB.json [--device NAME [--new-device]] [--priority N]\n"
    "         [--build build.json | --build-name N --build-version V --commit C]\n"
    "         [--wait [--quiet]] [--junit FILE] [--timeout S] [--retries N]\n"
    "                      submit a job or a suite file; print the job ids. --wait prints\n"
    "                      each job's verdict and a summary line; exits 0 if every case\n"
    "                      passed, 1 if any failed, 2 on error; --quiet: no progress lines.\n"
    "                      Each job carries an Idempotency-Key, so an unreachable server,\n"
    "                      a lost answer or a 5xx is retried (N times, default 4) safely\n"
    "  submit --rerun-failed JOB_ID [--device ...] [--build ...] [--wait] [--junit FILE] ...\n"
    "                      submit the job's spec restricted to its failed cases\n"
    "  jobs [--state S] [--kind K] [--device D] [--build B] [--limit N] [--cursor C]\n"
    "  show JOB_ID         one job, readable (--json: the API's JSON)\n"
    "  cancel JOB_ID...\n"
    "  cases JOB_ID [--failed] [--csv]\n"
    "                      the cases of a job; --csv: RFC 4180 CSV with a header row\n"
    "  artifact SHA256 [-o FILE [--tensor NAME]] [--manifest]\n"
    "                      download a failure artifact (or one tensor's raw bytes)\n"
    "  tolerance list [--op X] [--dtype D]\n"
    "  tolerance history --op X --dtype D\n"
    "  tolerance set --op X --dtype D [--mode PATTERN] --metric ulp|allclose|bound\n"
    "         (--max-ulp U | --atol A --rtol R | --c C --growth n|log2n|sqrtn [--u-dtype D])\n"
    "         --reason-code CODE --reason TEXT\n"
    "  builds              build identities, newest first, with a registered build's backend\n"
    "  builds register (--build build.json | --name N --version V [--commit C]) --backend SPEC\n"
    "                      register a build with the backend its jobs run on (scope admin)\n"
    "  bisect CASE_ID --good BUILD --bad BUILD [--device D] [--timeout S] [--daemon]\n"
    "                      the first build (registration order) where the suite case fails,\n"
    "                      one suite job per probe; exits 1 on non-monotone evidence;\n"
    "                      --daemon: numvald runs it (POST /api/v1/bisections)\n"
    "  devices             devices with their state and last crash\n"
    "  contract DEVICE [--build B]\n"
    "                      the device's measured contract beside describe()'s, per dtype\n"
    "                      and field, from its newest finished contract job (of build B)\n"
    "  repro CASE_ID [--backend SPEC] [--minimized] [--runs N] [--worker PATH] [--keep FILE]\n"
    "                      re-run a stored failure locally from its artifact alone; exits 1\n"
    "                      if it still fails, 0 if it no longer does\n"
    "  compare BASE_BUILD HEAD_BUILD [--kind op|gradient|fused|contract] [--op OP]\n"
    "                      newly failing, newly passing and drifting cases between builds,\n"
    "                      with tolerance changes, and changed measured contracts; exits 1\n"
    "                      if the head newly fails a case or a device's contract changed,\n"
    "                      3 if nothing matched\n"
    "  history --op OP --dtype DT [--kind op|gradient|fused] [--shape JSON] [--layout L]\n"
    "         [--input CLASS] [--device D] [--limit N]\n"
    "                      one test's verdict, error and tolerance per build, oldest first\n"
    "  flaky [--limit N]   the cases the agent's gate found flaky, with their rates\n"
    "  suite list [--state active|retired]\n"
    "                      the permanent suite of promoted reproducers\n"
    "  suite show ID       one suite case with its replay history and audit trail\n"
    "  suite retire ID --reason TEXT\n"
    "  schedules           numvald's cron schedules, their next and last runs\n"
    "\n"
    "--json (before or after the command) prints the API's JSON instead of text.\n"
    "Server and token also come from NUMVAL_SERVER and NUMVAL_TOKEN\n"
    "(default server http://127.0.0.1:8080). An https server's certificate is always\n"
    "verified, against the system's CAs or --cacert FILE (or NUMVAL_CACERT): the PEM\n"
    "certificate of a private CA or of a self-signed server.\n"
    "Exit status: 0 success, 1 failed cases\n"
    "(submit --wait, repro, compare), 2 error, 3 compare matched nothing.\n";

typedef struct command {
    const char *name;
    int (*fn)(nvc_conn *c, int argc, char **argv);
} command;

static const command COMMANDS[] = {
    {"submit", nvc_cmd_submit},       {"jobs", nvc_cmd_jobs},       {"show", nvc_cmd_show},
    {"cancel", nvc_cmd_cancel},       {"cases", nvc_cmd_cases},     {"artifact", nvc_cmd_artifact},
    {"tolerance", nvc_cmd_tolerance}, {"builds", nvc_cmd_builds},   {"devices", nvc_cmd_devices},
    {"repro", nvc_cmd_repro},         {"compare", nvc_cmd_compare}, {"suite", nvc_cmd_suite},
    {"schedules", nvc_cmd_schedules},                           /* cmd_schedules.c */
    {"history", nvc_cmd_history},     {"flaky", nvc_cmd_flaky}, /* cmd_history.c */
    {"bisect", nvc_cmd_bisect},                                 /* cmd_bisect.c */
    {"contract", nvc_cmd_contract},                             /* cmd_contract.c */
};

int main(int argc, char **argv)
{
    nvc_conn c = {0};
    c.server = getenv("NUMVAL_SERVER");
    c.token = getenv("NUMVAL_TOKEN");
    c.cacert = getenv("NUMVAL_CACERT");
    int i = 1;
    /* Global options before the command. */
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("numvalctl %s\n", NV_VERSION);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            c.json = true;
        } else if ((strcmp(a, "--server") == 0 || strcmp(a, "--token") == 0 ||
                    strcmp(a, "--cacert") == 0) &&
                   i + 1 < argc) {
            if (a[2] == 's')
                c.server = argv[++i];
            else if (a[2] == 't')
                c.token = argv[++i];
            else
                c.cacert = argv[++i];
        } else if (strncmp(a, "--cacert=", 9) == 0) {
            c.cacert = a + 9;
        } else if (strncmp(a, "--server=", 9) == 0) {
            c.server = a + 9;
        } else if (strncmp(a, "--token=", 8) == 0) {
            c.token = a + 8;
        } else {
            nvc_error("unknown or incomplete option '%s'\n%s", a, USAGE);
            return NVC_EXIT_ERROR;
        }
    }
    if (i >= argc) {
        fputs(USAGE, stderr);
        return NVC_EXIT_ERROR;
    }
    if (!c.server || !*c.server)
        c.server = "http://127.0.0.1:8080";
    const command *cmd = NULL;
    for (size_t k = 0; k < sizeof(COMMANDS) / sizeof(COMMANDS[0]); k++)
        if (strcmp(COMMANDS[k].name, argv[i]) == 0)
            cmd = &COMMANDS[k];
    if (!cmd) {
        nvc_error("unknown command '%s'; see 'numvalctl --help'", argv[i]);
        return NVC_EXIT_ERROR;
    }
    if (nvc_http_init() < 0) {
        nvc_error("cannot initialize libcurl");
        return NVC_EXIT_ERROR;
    }
    int status = cmd->fn(&c, argc - i - 1, argv + i + 1);
    nvc_http_done();
    return status;
}
