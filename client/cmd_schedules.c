/* numvalctl schedules: numvald's cron schedules with their last and
 * next run (GET /api/v1/schedules). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

int nvc_cmd_schedules(nvc_conn *c, int argc, char **argv)
{
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {NULL, NULL, NULL}};
    char *err = NULL;
    int npos = 0;
    if (nvc_parse(argc, argv, opts, NULL, 0, &npos, &err) < 0) {
        nvc_error("%s", err ? err : "schedules takes no arguments");
        free(err);
        return NVC_EXIT_ERROR;
    }
    json_t *resp = NULL;
    if (nvc_api(c, "GET", "/api/v1/schedules", NULL, &resp, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json) {
        nvc_print_json(resp);
        json_decref(resp);
        return NVC_EXIT_OK;
    }
    const char *h[] = {"NAME", "CRON", "SUITE", "DEVICE", "LAST_RUN", "LAST_JOBS", "NEXT_RUN"};
    nvc_table *t = nvc_table_new(7, h);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(resp, "schedules"), i, s)
    {
        const json_t *last = json_object_get(s, "last_run");
        char *jobs = nvc_json_text(json_object_get(last, "job_ids"));
        const char *dev = json_string_value(json_object_get(s, "device"));
        const char *started = json_string_value(json_object_get(last, "started_at"));
        const char *cells[7] = {json_string_value(json_object_get(s, "name")),
                                json_string_value(json_object_get(s, "cron")),
                                json_string_value(json_object_get(s, "suite")),
                                dev ? dev : "-",
                                started ? started : "never",
                                jobs ? jobs : "-",
                                json_string_value(json_object_get(s, "next_run"))};
        if (t)
            nvc_table_add(t, cells);
        free(jobs);
    }
    if (t)
        nvc_table_print(t, stdout);
    nvc_table_free(t);
    json_decref(resp);
    return NVC_EXIT_OK;
}
