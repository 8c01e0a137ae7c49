/* Readiness for systemd's Type=notify (packaging/systemd/numvald.service): one
 * datagram to $NOTIFY_SOCKET, the protocol of sd_notify(3), which systemd
 * documents as stable for reimplementation; no libsystemd needed. */
#ifndef NUMVAL_DAEMON_NOTIFY_H
#define NUMVAL_DAEMON_NOTIFY_H

/* Send STATE ("READY=1", "STOPPING=1", ...) when $NOTIFY_SOCKET names a socket;
 * 0 when sent or when there is none to send to, else -errno. */
int nvd_notify(const char *state);

#endif
