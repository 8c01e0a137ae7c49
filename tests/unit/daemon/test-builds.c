/* Registered builds (store_builds.c, store_bisect.c): a build's backend is set
 * once and never changed, registration order is the builds' order, the
 * predecessor and the range follow it. And the [webhook NAME] keys
 * (webhook_conf.c): what they accept and what they refuse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/store/store.h"
#include "daemon/store/store_bisect.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/nvd-test-builds-XXXXXX";

/* A fake hash for build n: 64 hex digits. */
static const char *hash(int n, char buf[65])
{
    snprintf(buf, 65, "%064x", n);
    return buf;
}

static void builds(void)
{
    char path[300], h1[65], h2[65], h3[65], *err = NULL, *have = NULL, *got = NULL;
    snprintf(path, sizeof path, "%s/numvald.db", dir);
    nvd_store *s = NULL;
    int r = nvd_store_open(path, NULL, &s, &err);
    tap_ok(r == 0, "store opens (%s)", err ? err : "ok");
    if (r < 0)
        return;
    /* b1 seen in a job first (no backend), then b2 and b3 registered. */
    nvd_store_build_put(s, hash(1, h1), "{\"version\":\"b1\"}", 1000);
    r = nvd_store_build_register(s, hash(2, h2), "{\"version\":\"b2\"}", "plugin:/x/b2.so", 1000,
                                 &have);
    tap_ok(r == 0, "b2 registered");
    r = nvd_store_build_register(s, hash(3, h3), "{\"version\":\"b3\"}", "emu", 1000, &have);
    tap_ok(r == 0, "b3 registered in the same millisecond");
    r = nvd_store_build_register(s, h2, "{\"version\":\"b2\"}", "plugin:/x/b2.so", 2000, &have);
    tap_ok(r == 0, "the same backend again: 0");
    r = nvd_store_build_register(s, h2, "{\"version\":\"b2\"}", "plugin:/y/other.so", 2000, &have);
    tap_ok(r == -EEXIST && have && !strcmp(have, "plugin:/x/b2.so"),
           "another backend: -EEXIST naming the first (%s)", have ? have : "NULL");
    free(have);
    r = nvd_store_build_backend(s, h2, &got);
    tap_ok(r == 0 && got && !strcmp(got, "plugin:/x/b2.so"), "b2 keeps its first backend");
    free(got);
    got = NULL;
    r = nvd_store_build_register(s, h1, "{\"version\":\"b1\"}", "emu:fault=x", 3000, &have);
    tap_ok(r == 0 && nvd_store_build_backend(s, h1, &got) == 0 && got && !strcmp(got, "emu:fault=x"),
           "b1, seen in a job, gets a backend when registered");
    free(got);
    got = NULL;
    tap_ok(nvd_store_build_backend(s, hash(9, h3), &got) == 0 && !got, "unknown build: no backend");
    hash(3, h3);

    json_t *list = NULL;
    nvd_store_builds_list(s, 10, &list);
    const char *order[3];
    for (int i = 0; i < 3; i++)
        order[i] = json_string_value(
            json_object_get(json_object_get(json_array_get(list, (size_t)i), "identity"), "version"));
    tap_ok(json_array_size(list) == 3 && !strcmp(order[0], "b3") && !strcmp(order[2], "b1"),
           "newest first: b3 .. b1; registering b1 late did not move it");
    json_decref(list);

    char *pred = NULL;
    r = nvd_store_build_predecessor(s, h3, &pred);
    tap_ok(r == 0 && !strcmp(pred, h2), "predecessor of b3: b2 (a tie in time, by rowid)");
    free(pred);
    tap_ok(nvd_store_build_predecessor(s, h1, &pred) == -ENOENT, "b1 has no predecessor");

    json_t *range = NULL;
    r = nvd_store_build_range(s, h1, h3, &range);
    tap_ok(r == 0 && json_array_size(range) == 3 &&
               !strcmp(json_string_value(json_object_get(json_array_get(range, 1), "id")), h2) &&
               !strcmp(json_string_value(json_object_get(json_array_get(range, 1), "backend")),
                       "plugin:/x/b2.so"),
           "range b1..b3: three builds in order, with backends");
    json_decref(range);
    tap_ok(nvd_store_build_range(s, h3, h1, &range) == -EINVAL, "range b3..b1: -EINVAL");
    tap_ok(nvd_store_build_range(s, h1, h1, &range) == -EINVAL, "range b1..b1: -EINVAL");
    tap_ok(nvd_store_build_range(s, h1, hash(9, h2), &range) == -ENOENT, "unknown end: -ENOENT");
    nvd_store_free(s);
    unlink(path);
}

static void webhook_keys(void)
{
    nvd_config c;
    nvd_config_init(&c);
    tap_ok(nvd_webhook_conf_key(&c, "ci", "url", "ftp://x/") == -EINVAL, "url: ftp refused");
    tap_ok(nvd_webhook_conf_key(&c, "ci", "url", "https://ci.example/h") == 0, "url: https");
    tap_ok(nvd_webhook_conf_key(&c, "ci", "events", "promoted, nope") == -EINVAL,
           "events: an unknown one refused");
    tap_ok(nvd_webhook_conf_key(&c, "ci", "events", " , ") == -EINVAL, "events: empty refused");
    char buf[256] = "";
    nvd_webhook_conf_check(&c, buf, sizeof buf);
    tap_ok(strstr(buf, "'ci' has no 'events'") != NULL, "check: %s", buf);
    tap_ok(nvd_webhook_conf_key(&c, "ci", "events", "regression,schedule_failed") == 0 &&
               c.webhooks[0].events == (NVD_EV_REGRESSION | NVD_EV_SCHEDULE_FAILED),
           "events: two bits");
    tap_ok(nvd_webhook_conf_key(&c, "ci", "max_attempts", "0") == -EINVAL &&
               nvd_webhook_conf_key(&c, "ci", "max_attempts", "3") == 0 &&
               c.webhooks[0].max_attempts == 3,
           "max_attempts: 1..100");
    tap_ok(nvd_webhook_conf_key(&c, "ci", "colour", "x") == -ENOENT, "unknown key: -ENOENT");
    buf[0] = '\0';
    nvd_webhook_conf_check(&c, buf, sizeof buf);
    tap_ok(!buf[0], "complete section passes the check");
    int r = 0;
    for (int i = 1; i < NVD_WEBHOOKS_MAX && r == 0; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        r = nvd_webhook_conf_key(&c, name, "url", "http://127.0.0.1:1/");
    }
    tap_ok(r == 0 && nvd_webhook_conf_key(&c, "one-too-many", "url", "http://a/") == -E2BIG &&
               nvd_webhook_conf_key(&c, "w3", "events", "promoted") == 0,
           "at most %d sections; a known one still takes keys", NVD_WEBHOOKS_MAX);
    nvd_config_done(&c);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    builds();
    webhook_keys();
    rmdir(dir);
    return tap_done();
}
