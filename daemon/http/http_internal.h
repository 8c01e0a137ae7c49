/* Helpers of the HTTP module that do not touch the parser (daemon/http/ only). */
#ifndef NUMVAL_DAEMON_HTTP_INTERNAL_H
#define NUMVAL_DAEMON_HTTP_INTERNAL_H

#include <stddef.h>
#include <sys/socket.h>

/* {"error":{"code","message"[,"field"]}} into buf; snprintf's return value. */
int http_format_error(char *buf, size_t cap, const char *code, const char *message,
                      const char *field);
/* "HOST:PORT", "[V6]:PORT" or ":PORT" (any IPv4 address) into ss. 0 or -EINVAL. */
int http_parse_listen(const char *listen, struct sockaddr_storage *ss);

#endif
