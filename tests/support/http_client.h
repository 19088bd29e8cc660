/*
 * http_client.h - what the server tests need to talk to `loom serve`: a
 * small blocking HTTP/1.1 client over raw sockets, Server-Sent Events read
 * one at a time, and child processes (the server, a proxy) started, watched
 * and stopped.
 *
 *     serve_proc srv;
 *     if (!serve_start(&srv, model_path, (const char *[]){"-np", "2", NULL}))
 *             ... (the message is in srv.log)
 *     http_response r = http_post(srv.port, "/v1/completions", "{\"prompt\": \"Once\"}");
 *     ck_assert_int_eq(r.status, 200);
 *     ... r.body ...
 *     http_response_free(&r);
 *     int status = serve_stop(&srv, SIGTERM);    (exit status, 128 + N if killed by N)
 *
 * Every read and write on a socket gives up after http_timeout_ms (a hung
 * server fails the test instead of hanging it). Every child is killed when
 * the test process exits (atexit, and the kernel's parent-death signal if
 * the test process is itself killed), so a failed assertion leaves none
 * running. Connections are not thread-safe; use one per thread.
 */
#ifndef LOOM_TEST_HTTP_CLIENT_H
#define LOOM_TEST_HTTP_CLIENT_H

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Receive and send timeout of every connection (default 60 000 ms). */
extern int http_timeout_ms;

typedef struct http_response {
	int status;      /* 0 if no response came: error says why */
	char *headers;   /* the header lines as received, NUL-terminated */
	char *body;      /* decoded (Content-Length or chunked), NUL-terminated */
	size_t body_len;
	char error[200]; /* what went wrong at the transport level, else "" */
} http_response;

void http_response_free(http_response *r);

/* A header's value (the first with that name, any case) copied into buf;
 * NULL if there is none. */
const char *http_header(const http_response *r, const char *name, char *buf, size_t size);

/* The body as JSON (free with cJSON_Delete); NULL if it is not JSON. */
cJSON *http_json(const http_response *r);

typedef struct http_conn http_conn;

/* Connects to 127.0.0.1:port; NULL with errno set (ECONNREFUSED: nothing
 * listens there). */
http_conn *http_connect(int port);
void http_close(http_conn *c); /* NULL is fine */
/* The socket, to poll() on. */
int http_fd(const http_conn *c);
/* Why the last call on c failed. */
const char *http_error(const http_conn *c);

/* Sends one request. headers: extra header lines, each ending in "\r\n"
 * (NULL: none). A body (body_len bytes; NULL for none) goes with a
 * Content-Length and Content-Type: application/json. */
bool http_send(http_conn *c, const char *method, const char *path, const char *headers, const char *body,
	       size_t body_len);
/* Sends bytes as they are (a request the helpers would not write). */
bool http_send_raw(http_conn *c, const char *data, size_t len);

/* Reads a whole response. */
bool http_read_response(http_conn *c, http_response *out);
/* Reads the status line and headers only; the body is then read with
 * http_read_body or http_next_event. */
bool http_read_head(http_conn *c, http_response *out);
bool http_read_body(http_conn *c, http_response *out);

/* The payload of the next SSE "data:" line of the body (malloc'd), or NULL
 * when the body ends: http_stream_ended() then tells a clean end (the last
 * chunk, or the Content-Length reached) from a cut connection or a
 * timeout (http_error() says which). */
char *http_next_event(http_conn *c);
bool http_stream_ended(const http_conn *c);
/* Whether http_next_event would return without waiting for the server: a
 * whole event was received (or the body has ended). To wait for events on
 * several connections at once: take events while this says so, else poll()
 * the sockets and call http_pump on the readable ones. */
bool http_event_ready(http_conn *c);
/* Receives what the socket holds (once poll() said it is readable); false
 * when the server closed the connection or on an error. */
bool http_pump(http_conn *c);

/* One request on a fresh connection: status 0 (and error set) if it could
 * not be made or no response came. */
http_response http_request(int port, const char *method, const char *path, const char *headers, const char *body);
http_response http_get(int port, const char *path);
http_response http_post(int port, const char *path, const char *json);

/* A streamed request: sends it and reads the response's head into *head.
 * NULL if that failed (head->error says why). */
http_conn *http_stream_open(int port, const char *path, const char *headers, const char *json, http_response *head);

/* A sample's value from GET /metrics: name as it appears before the value,
 * labels included ("loom_http_errors_total{code=\"400\"}"); a name without
 * labels whose samples all have labels gives their sum. NAN if the scrape
 * fails or the metric is not there. */
double http_metric(int port, const char *name);

/* The node at a path of object keys and array indices separated by '.'
 * ("choices.0.message.content"); NULL if any step is missing. */
const cJSON *json_at(const cJSON *root, const char *path);
/* Its string, or NULL if the node is missing or not a string. */
const char *json_str(const cJSON *root, const char *path);
/* Its number, or NAN. */
double json_num(const cJSON *root, const char *path);

/* ---- Child processes ---- */

/* Starts argv[0] (a path) with argv; its standard error goes to a pipe
 * (*err_fd, non-blocking; NULL: inherited). Standard input is /dev/null.
 * Returns the pid, or -1. */
pid_t test_spawn(const char *const argv[], int *err_fd);
/* Sends sig (0: none) and waits up to timeout_ms for the child to exit,
 * then SIGKILLs it. Bytes read from err_fd meanwhile (-1: none) are
 * appended to *log (malloc'd; may be NULL). Returns the exit status, 128 + N
 * if it was killed by signal N. */
int test_reap(pid_t pid, int sig, int timeout_ms, int err_fd, char **log);
/* Whether the child has exited (it is then reaped: *status gets what
 * test_reap returns). */
bool test_exited(pid_t pid, int *status);

typedef struct serve_proc {
	pid_t pid;
	int port;
	int err_fd;
	char *log; /* standard error so far */
} serve_proc;

/* Starts `LOOM_TEST_BUILD_DIR/loom serve -m model --port 0` with the build
 * tree's plugins and args
 * (NULL-terminated; NULL for none) and waits for its "listening on" line.
 * false if it exits or says nothing in time (p->log says why; the process
 * is reaped). */
bool serve_start(serve_proc *p, const char *model, const char *const *args);
/* Sends sig and waits for the exit (SIGKILL after 60 s); returns the exit
 * status as test_reap does, and keeps the log. A pid of 0 is left alone
 * (returns -1). */
int serve_stop(serve_proc *p, int sig);
/* Drops p's resources (the log) after serve_stop. */
void serve_proc_free(serve_proc *p);
/* Reads what the server wrote to standard error since the last call into
 * p->log. */
void serve_drain(serve_proc *p);
/* The server's resident memory in KiB (/proc/PID/status VmRSS); -1 if it
 * cannot be read. */
long serve_rss_kib(const serve_proc *p);

/* A loopback TCP port that was free a moment ago (bound with port 0 and
 * closed); -1 on failure. */
int test_free_port(void);

#endif
