/* Static files: the web UI from the web dir at /, JavaScript libraries from
 * the system's /usr/share/javascript at /js/. Read-only, regular files only,
 * and no path segment may be empty, "." or ".." (checked after percent-
 * decoding, so "%2e%2e" is refused too). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"

#define MAX_STATIC_BYTES (32u << 20)

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".htm", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".jpg", "image/jpeg"},
    {".woff2", "font/woff2"},
    {".woff", "font/woff"},
    {".txt", "text/plain; charset=utf-8"},
    {".wasm", "application/wasm"},
};

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            if (!strcmp(dot, types[i].ext))
                return types[i].type;
    return "application/octet-stream";
}

/* Every segment non-empty, not "." or "..", no backslash or control bytes. */
static bool rel_ok(const char *rel)
{
    const char *p = rel;
    for (;;) {
        const char *sl = strchr(p, '/');
        size_t n = sl ? (size_t)(sl - p) : strlen(p);
        if (n == 0 && sl)
            return false;
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f)
                return false;
        if (!sl)
            return true;
        p = sl + 1;
    }
}

static void static_error(nvd_http_req *req, int status, const char *code, const char *msg)
{
    nvd_http_error(req, status, code, msg, NULL);
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = 0;
    char *buf = NULL;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        r = -EISDIR;
        goto out;
    }
    if ((uint64_t)st.st_size > MAX_STATIC_BYTES) {
        r = -EFBIG;
        goto out;
    }
    size_t n = (size_t)st.st_size, got = 0;
    buf = malloc(n ? n : 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            r = k < 0 ? -errno : -EIO;
            goto out;
        }
        got += (size_t)k;
    }
    *ret = buf;
    *ret_len = n;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return r;
}

void api_static(nvd_app *app, nvd_http_req *req)
{
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) {
        static_error(req, 405, "method_not_allowed", "static files are read-only (GET, HEAD)");
        return;
    }
    const char *root = app->web_dir, *rel = req->path + 1;
    if (!strncmp(req->path, "/js/", 4)) {
        root = app->cfg->js_dir;
        rel = req->path + 4;
    }
    if (req->path[0] != '/' || !rel_ok(rel)) {
        static_error(req, 400, "bad_request", "path segments may not be empty, '.' or '..'");
        return;
    }
    if (!root) {
        static_error(req, 404, "not_found", "no web UI directory is configured (--web-dir)");
        return;
    }
    size_t n = strlen(root) + strlen(rel) + 16;
    char *path = nvd_http_alloc(req, n);
    if (!path) {
        static_error(req, 503, "unavailable", "out of memory");
        return;
    }
    bool dir = !*rel || rel[strlen(rel) - 1] == '/';
    snprintf(path, n, "%s/%s%s", root, rel, dir ? "index.html" : "");
    char *body = NULL;
    size_t len = 0;
    int r = read_file(path, &body, &len);
    if (r == -EISDIR) {
        snprintf(path, n, "%s/%s/index.html", root, rel);
        r = read_file(path, &body, &len);
    }
    if (r == -ENOENT || r == -ENOTDIR || r == -EISDIR || r == -EACCES || r == -ELOOP) {
        char msg[300];
        snprintf(msg, sizeof(msg), "no file '%.200s'", req->path);
        static_error(req, 404, "not_found", msg);
        return;
    }
    if (r < 0) {
        static_error(req, r == -EFBIG ? 413 : 500, r == -EFBIG ? "too_large" : "internal",
                     "cannot read the file");
        return;
    }
    nvd_http_respond(req, 200, content_type(path), body, len, "Cache-Control: no-cache\r\n");
    free(body);
}
