/* numvalctl internals: the HTTP wrapper (http.c, the only file that sees curl),
 * argument parsing, table output and the commands. */
#ifndef NUMVAL_CLIENT_H
#define NUMVAL_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Exit statuses (numvalctl submit --wait: 0 all passed, 1 some case failed;
 * compare: 3 when no case of the two builds matched, so a CI gate that compared
 * nothing does not pass). */
enum { NVC_EXIT_OK = 0, NVC_EXIT_FAILED = 1, NVC_EXIT_ERROR = 2, NVC_EXIT_NOTHING = 3 };

typedef struct nvc_conn {
    const char *server; /* base URL without trailing slash */
    const char *token;  /* may be NULL */
    bool json;          /* --json: machine-readable listings */
    const char *header; /* one more request header ("Name: value"), or NULL */
    const char *cacert; /* --cacert: CA certificates (PEM) for https, or NULL: the system's */
} nvc_conn;

typedef struct nvc_response {
    long status; /* HTTP status */
    char *body;  /* NUL-terminated (binary bodies: use len) */
    size_t len;
} nvc_response;

/* Process-wide curl setup and teardown. */
int nvc_http_init(void);
void nvc_http_done(void);

/* One request to server + path. body may be NULL. Returns 0 when an HTTP
 * response arrived (any status; *ret filled, free with nvc_response_done), or
 * -ECONNREFUSED/-ETIMEDOUT/-EIO when the server could not be reached, with a
 * malloc'd message in *ret_err. timeout_s 0: the default (60 s). */
int nvc_http(const nvc_conn *c, const char *method, const char *path, const char *content_type,
             const void *body, size_t body_len, long timeout_s, nvc_response *ret, char **ret_err);
void nvc_response_done(nvc_response *r);

/* Percent-encode a query value; malloc'd, NULL on ENOMEM. */
char *nvc_escape(const char *s);

/* JSON request: sends body (may be NULL), expects a JSON reply. On 2xx returns
 * 0 and a new reference in *ret (NULL for 204). On an HTTP error returns
 * -EPROTO with *ret_err formatted from the server's {"error":{code, message,
 * field}}; unreachable server as nvc_http. */
int nvc_api(const nvc_conn *c, const char *method, const char *path, json_t *body, json_t **ret,
            char **ret_err);

/* nvc_api for a request that is safe to repeat (one carrying an
 * Idempotency-Key): an unreachable server, a lost response or a 5xx is tried
 * again up to retries more times, 1 s, 2 s, 4 s ... (at most 8 s) apart, each
 * retry said on stderr. */
int nvc_api_retry(const nvc_conn *c, const char *method, const char *path, json_t *body,
                  int retries, json_t **ret, char **ret_err);

/* Command-line options: "--name value", "--name=value" or a flag. */
typedef struct nvc_opt {
    const char *name;   /* without the dashes */
    const char **value; /* set for options taking a value */
    bool *flag;         /* set for flags */
} nvc_opt;

/* The options every command also accepts after its name. */
#define NVC_GLOBAL_OPTS(c)                                                                         \
    {"server", &(c)->server, NULL}, {"token", &(c)->token, NULL},                                  \
    {                                                                                              \
        "json", NULL, &(c)->json                                                                   \
    }

/* Parse argv[0..argc) against opts (NULL-name terminated); non-option words go
 * to pos[] (at most max_pos). Returns 0 or -EINVAL with *ret_err set. */
int nvc_parse(int argc, char **argv, const nvc_opt *opts, const char **pos, int max_pos,
              int *ret_npos, char **ret_err);

/* Aligned text table. */
typedef struct nvc_table nvc_table;
nvc_table *nvc_table_new(int ncols, const char *const *headers);
int nvc_table_add(nvc_table *t, const char *const *cells); /* copies */
void nvc_table_print(const nvc_table *t, FILE *f);
void nvc_table_free(nvc_table *t);

/* One CSV record (RFC 4180): fields with a comma, a quote or a line break are
 * quoted, quotes doubled; NULL is an empty field; the record ends with CRLF. */
void nvc_csv_row(FILE *f, int n, const char *const *cells);

/* Render a JSON scalar (or compact JSON for containers) as text; malloc'd.
 * NULL (a missing key) renders as "-". */
char *nvc_json_text(const json_t *v);
/* An id (the API's ids are integers; strings are accepted too) as text in
 * buf[32]; "" when v is neither. Returns buf. */
const char *nvc_id_text(const json_t *v, char buf[32]);
/* Print key and v readably to stdout at indent spaces: a scalar on the key's
 * line, an object as its keys indented below, an array of scalars on one line
 * (cut past 160 characters), an array of objects as "- [i]" items; base64
 * payloads (a "data" next to an "encoding" naming base64, or any long base64
 * string) by their size, and where job_id (may be NULL) serves them. parent is
 * the object holding key (may be NULL). */
void nvc_show_value(const json_t *parent, const char *key, const json_t *v, int indent,
                    const char *job_id);
/* Print a JSON value indented, to stdout. */
void nvc_print_json(const json_t *v);
/* Read a whole file as JSON; returns NULL with *ret_err set. */
json_t *nvc_load_json_file(const char *path, char **ret_err);

/* Commands: argc/argv start after the command name. Return an exit status. */
int nvc_cmd_submit(nvc_conn *c, int argc, char **argv);
int nvc_cmd_jobs(nvc_conn *c, int argc, char **argv);
int nvc_cmd_show(nvc_conn *c, int argc, char **argv);
int nvc_cmd_cancel(nvc_conn *c, int argc, char **argv);
int nvc_cmd_cases(nvc_conn *c, int argc, char **argv);
int nvc_cmd_artifact(nvc_conn *c, int argc, char **argv);
int nvc_cmd_tolerance(nvc_conn *c, int argc, char **argv);
int nvc_cmd_builds(nvc_conn *c, int argc, char **argv);
int nvc_cmd_devices(nvc_conn *c, int argc, char **argv);
int nvc_cmd_history(nvc_conn *c, int argc, char **argv); /* cmd_history.c */
int nvc_cmd_flaky(nvc_conn *c, int argc, char **argv);   /* cmd_history.c */
int nvc_cmd_bisect(nvc_conn *c, int argc, char **argv);  /* cmd_bisect.c */
/* numvalctl builds register (cmd_bisect.c). */
int nvc_cmd_build_register(nvc_conn *c, int argc, char **argv);

/* Fetch every case of a job (following cursors); failed_only filters. */
int nvc_fetch_cases(const nvc_conn *c, const char *job_id, bool failed_only, json_t **ret,
                    char **ret_err);
/* Write JUnit XML for jobs (array of JOB objects) with their cases (array of
 * arrays, same order): test cases by kind, docs/CLIENT.md "JUnit XML". 0 or
 * negative errno, *ret_err set (NULL on ENOMEM). */
int nvc_junit_write(const char *path, const json_t *jobs, const json_t *cases, char **ret_err);
/* The JUnit suite name of a job, "numval.KIND.NAME" (the op, graph or model
 * name: the same in every run), into buf. */
void nvc_junit_suite_name(const json_t *job, char *buf, size_t n);
/* A job's duration (finished_at - started_at) in seconds; 0 when unknown. */
double nvc_job_seconds(const json_t *job);

/* A tolerance object as a short text: "\u2264 1 ULP (v2)", "\u2264 atol A + rtol R \u00b7 |ref|
 * (default)", "bound c 2, growth n (job)"; "none" for a non-object. */
void nvc_tolerance_text(const json_t *tol, char *buf, size_t n);

/* The spec of a rerun of job_id's failed cases (cmd_rerun.c): op, gradient and
 * fused jobs restricted to the dtypes, shapes, layouts and input classes the
 * failed cases used; a suite job to its failed suite cases; a long run whole.
 * Prints what it reruns to stderr. *ret a new reference; -EINVAL (message
 * printed) for a job without a failed case, or another negative errno. */
int nvc_rerun_spec(const nvc_conn *c, const char *job_id, json_t **ret);

void nvc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
