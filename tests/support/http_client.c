/* http_client.c - a blocking HTTP/1.1 client and child processes for the
 * server tests. */
#define _GNU_SOURCE
#include "http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int http_timeout_ms = 60000;

/* ---- Growing strings ---- */

typedef struct str {
	char *data;
	size_t len, cap;
} str;

static void str_add(str *s, const char *data, size_t len)
{
	if (s->len + len + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->len + len + 1)
			cap *= 2;
		char *d = realloc(s->data, cap);
		if (d == NULL)
			abort(); /* test code: out of memory is not a case to handle */
		s->data = d;
		s->cap = cap;
	}
	if (len > 0)
		memcpy(s->data + s->len, data, len);
	s->len += len;
	s->data[s->len] = '\0';
}

static void str_addf(str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void str_addf(str *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *tmp = malloc((size_t)n + 1);
	if (tmp == NULL)
		abort();
	va_start(ap, fmt);
	vsnprintf(tmp, (size_t)n + 1, fmt, ap);
	va_end(ap);
	str_add(s, tmp, (size_t)n);
	free(tmp);
}

/* The string, "" when nothing was added; the caller owns it. */
static char *str_take(str *s)
{
	if (s->data == NULL)
		str_add(s, "", 0);
	char *d = s->data;
	*s = (str){0};
	return d;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- Connections ---- */

typedef enum body_mode {
	BODY_NONE,    /* no body (1xx, 204, 304) */
	BODY_LENGTH,  /* Content-Length bytes */
	BODY_CHUNKED, /* chunked transfer encoding */
	BODY_EOF,     /* until the server closes */
} body_mode;

#define CONN_BUF 65536

struct http_conn {
	int fd, port;
	char buf[CONN_BUF]; /* received, not consumed: [start, end) */
	size_t start, end;
	body_mode mode;
	uint64_t left;      /* bytes left of the body (LENGTH) or of the chunk (CHUNKED) */
	bool in_chunk;      /* CHUNKED: a chunk's data was read; its CRLF comes next */
	bool body_done;
	str line;           /* SSE: decoded body bytes not yet split into lines */
	char err[200];
};

static bool conn_fail(http_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool conn_fail(http_conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return false;
}

http_conn *http_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct timeval tv = {http_timeout_ms / 1000, (http_timeout_ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	http_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		abort();
	c->fd = fd;
	c->port = port;
	return c;
}

void http_close(http_conn *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->line.data);
	free(c);
}

int http_fd(const http_conn *c)
{
	return c->fd;
}

const char *http_error(const http_conn *c)
{
	return c->err;
}

/* Receives more bytes: 1, or 0 when the peer closed, -1 on an error or a
 * timeout (c->err says which). */
static int conn_fill(http_conn *c)
{
	if (c->start == c->end)
		c->start = c->end = 0;
	if (c->end == sizeof(c->buf)) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	ssize_t n;
	do
		n = recv(c->fd, c->buf + c->end, sizeof(c->buf) - c->end, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		c->end += (size_t)n;
		return 1;
	}
	if (n == 0) {
		conn_fail(c, "the server closed the connection");
		return 0;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		conn_fail(c, "no data from the server in %d ms", http_timeout_ms);
	else
		conn_fail(c, "recv: %s", strerror(errno));
	return -1;
}

/* One line of the raw stream, without its CRLF or LF. */
static bool conn_line(http_conn *c, str *out)
{
	out->len = 0;
	for (;;) {
		char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);
		size_t take = nl != NULL ? (size_t)(nl - (c->buf + c->start)) : c->end - c->start;
		str_add(out, c->buf + c->start, take);
		c->start += take;
		if (nl != NULL) {
			c->start++;
			if (out->len > 0 && out->data[out->len - 1] == '\r')
				out->data[--out->len] = '\0';
			return true;
		}
		if (conn_fill(c) <= 0)
			return false;
	}
}

static bool send_all(http_conn *c, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return conn_fail(c, "send: %s", n < 0 ? strerror(errno) : "nothing sent");
		data += n;
		len -= (size_t)n;
	}
	return true;
}

bool http_send_raw(http_conn *c, const char *data, size_t len)
{
	return send_all(c, data, len);
}

bool http_send(http_conn *c, const char *method, const char *path, const char *headers, const char *body,
	       size_t body_len)
{
	str req = {0};
	str_addf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s", method, path, c->port, headers ? headers : "");
	if (body != NULL)
		str_addf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", body_len);
	str_add(&req, "\r\n", 2);
	if (body != NULL)
		str_add(&req, body, body_len);
	bool ok = send_all(c, req.data, req.len);
	free(req.data);
	return ok;
}

/* A header's value in a block of header lines. */
static const char *find_header(const char *headers, const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);
	for (const char *p = headers; p != NULL && *p != '\0';) {
		const char *eol = strchr(p, '\n');
		size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
		if (len > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t vlen = (size_t)(p + len - v);
			while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
				vlen--;
			snprintf(buf, size, "%.*s", (int)vlen, v);
			return buf;
		}
		p = eol != NULL ? eol + 1 : NULL;
	}
	return NULL;
}

const char *http_header(const http_response *r, const char *name, char *buf, size_t size)
{
	return r->headers != NULL ? find_header(r->headers, name, buf, size) : NULL;
}

bool http_read_head(http_conn *c, http_response *out)
{
	str line = {0}, headers = {0};
	memset(out, 0, sizeof(*out));
	c->mode = BODY_EOF;
	c->left = 0;
	c->in_chunk = c->body_done = false;
	c->line.len = 0;
	c->err[0] = '\0';
	bool ok;
	int status = 0;
	do { /* 1xx responses come before the real one */
		headers.len = 0;
		ok = conn_line(c, &line);
		if (ok && (sscanf(line.data, "HTTP/1.%*d %d", &status) != 1 || status < 100))
			ok = conn_fail(c, "not an HTTP status line: \"%.80s\"", line.data);
		while (ok && (ok = conn_line(c, &line)) && line.len > 0) {
			str_add(&headers, line.data, line.len);
			str_add(&headers, "\n", 1);
		}
	} while (ok && status < 200);
	free(line.data);
	if (!ok) {
		free(headers.data);
		snprintf(out->error, sizeof(out->error), "%s", c->err);
		return false;
	}
	out->status = status;
	out->headers = str_take(&headers);
	char v[64];
	if (status == 204 || status == 304) {
		c->mode = BODY_NONE;
	} else if (find_header(out->headers, "Transfer-Encoding", v, sizeof(v)) != NULL && strcasestr(v, "chunked")) {
		c->mode = BODY_CHUNKED;
	} else if (find_header(out->headers, "Content-Length", v, sizeof(v)) != NULL) {
		c->mode = BODY_LENGTH;
		c->left = strtoull(v, NULL, 10);
	}
	return true;
}

/* Reads the chunked encoding's framing up to the next data byte. False at
 * the end of the body (c->body_done) or on an error. */
static bool next_chunk(http_conn *c)
{
	str line = {0};
	bool ok = true;
	if (c->in_chunk) {
		ok = conn_line(c, &line) && (line.len == 0 || conn_fail(c, "no CRLF after a chunk"));
		c->in_chunk = false;
	}
	if (ok && conn_line(c, &line)) {
		char *end;
		unsigned long long size = strtoull(line.data, &end, 16);
		if (end == line.data) {
			ok = conn_fail(c, "bad chunk size line \"%.40s\"", line.data);
		} else if (size == 0) {
			while ((ok = conn_line(c, &line)) && line.len > 0) /* trailers */
				;
			c->body_done = ok;
			ok = false;
		} else {
			c->left = size;
			c->in_chunk = true;
		}
	} else {
		ok = false;
	}
	free(line.data);
	return ok;
}

/* Up to max decoded body bytes: > 0, 0 at the body's end, -1 on an error. */
static ssize_t body_read(http_conn *c, char *dst, size_t max)
{
	if (c->body_done || c->mode == BODY_NONE) {
		c->body_done = true;
		return 0;
	}
	if (c->mode == BODY_CHUNKED && c->left == 0 && !next_chunk(c))
		return c->body_done ? 0 : -1;
	if (c->mode == BODY_LENGTH && c->left == 0) {
		c->body_done = true;
		return 0;
	}
	if (c->start == c->end) {
		int st = conn_fill(c);
		if (st == 0 && c->mode == BODY_EOF) {
			c->body_done = true;
			c->err[0] = '\0';
			return 0;
		}
		if (st <= 0) {
			if (st == 0)
				conn_fail(c, "the server closed the connection before the end of the body");
			return -1;
		}
	}
	size_t take = c->end - c->start;
	if (take > max)
		take = max;
	if (c->mode != BODY_EOF && take > c->left)
		take = (size_t)c->left;
	memcpy(dst, c->buf + c->start, take);
	c->start += take;
	c->left -= c->mode != BODY_EOF ? take : 0;
	return (ssize_t)take;
}

bool http_read_body(http_conn *c, http_response *out)
{
	str body = {0};
	char tmp[16384];
	ssize_t n;
	while ((n = body_read(c, tmp, sizeof(tmp))) > 0)
		str_add(&body, tmp, (size_t)n);
	free(out->body);
	out->body_len = body.len;
	out->body = str_take(&body);
	if (n < 0) {
		snprintf(out->error, sizeof(out->error), "%s", c->err);
		return false;
	}
	return true;
}

bool http_read_response(http_conn *c, http_response *out)
{
	return http_read_head(c, out) && http_read_body(c, out);
}

char *http_next_event(http_conn *c)
{
	char tmp[4096];
	for (;;) {
		char *nl = c->line.len > 0 ? memchr(c->line.data, '\n', c->line.len) : NULL;
		if (nl != NULL) {
			size_t len = (size_t)(nl - c->line.data);
			char *event = NULL;
			if (len >= 5 && strncmp(c->line.data, "data:", 5) == 0) {
				size_t skip = len > 5 && c->line.data[5] == ' ' ? 6 : 5;
				size_t n = len - skip;
				if (n > 0 && c->line.data[skip + n - 1] == '\r')
					n--;
				event = strndup(c->line.data + skip, n);
			}
			memmove(c->line.data, nl + 1, c->line.len - len - 1);
			c->line.len -= len + 1;
			if (event != NULL)
				return event;
			continue;
		}
		ssize_t n = body_read(c, tmp, sizeof(tmp));
		if (n <= 0)
			return NULL;
		str_add(&c->line, tmp, (size_t)n);
	}
}

bool http_stream_ended(const http_conn *c)
{
	return c->body_done;
}

/* Moves the body bytes already received into c->line, as far as that is
 * possible without waiting: chunk framing is consumed only when whole.
 * True when what was received reaches the body's end. */
static bool decode_received(http_conn *c)
{
	while (!c->body_done && c->mode != BODY_NONE) {
		const char *p = c->buf + c->start;
		size_t n = c->end - c->start;
		if (c->mode == BODY_CHUNKED && c->left == 0) {
			if (c->in_chunk) { /* the CRLF after the last chunk's data */
				size_t crlf = n >= 1 && p[0] == '\n' ? 1 : n >= 2 && p[0] == '\r' && p[1] == '\n' ? 2 : 0;
				if (crlf == 0)
					return false;
				p += crlf;
				n -= crlf;
			}
			const char *nl = memchr(p, '\n', n);
			if (nl == NULL)
				return false;
			unsigned long long size = strtoull(p, NULL, 16);
			if (size == 0) /* the last chunk: http_next_event reads it */
				return true;
			c->start = (size_t)(nl + 1 - c->buf);
			c->left = size;
			c->in_chunk = true;
			continue;
		}
		if (c->mode == BODY_LENGTH && c->left == 0)
			return true;
		size_t take = c->mode == BODY_EOF || n < c->left ? n : (size_t)c->left;
		if (take == 0)
			return false;
		str_add(&c->line, p, take);
		c->start += take;
		c->left -= c->mode != BODY_EOF ? take : 0;
	}
	return true;
}

bool http_event_ready(http_conn *c)
{
	if (decode_received(c))
		return true;
	for (size_t i = 0; i < c->line.len;) {
		char *nl = memchr(c->line.data + i, '\n', c->line.len - i);
		if (nl == NULL)
			return false;
		if (strncmp(c->line.data + i, "data:", 5) == 0)
			return true;
		i = (size_t)(nl - c->line.data) + 1;
	}
	return false;
}

bool http_pump(http_conn *c)
{
	if (c->end == sizeof(c->buf) && c->start == 0)
		return true; /* full: http_event_ready or http_next_event must consume first */
	return conn_fill(c) > 0;
}

void http_response_free(http_response *r)
{
	free(r->headers);
	free(r->body);
	r->headers = r->body = NULL;
}

cJSON *http_json(const http_response *r)
{
	return r->body != NULL ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
}

http_response http_request(int port, const char *method, const char *path, const char *headers, const char *body)
{
	http_response r = {0};
	http_conn *c = http_connect(port);
	if (c == NULL) {
		snprintf(r.error, sizeof(r.error), "connect to port %d: %s", port, strerror(errno));
		return r;
	}
	if (!http_send(c, method, path, headers, body, body != NULL ? strlen(body) : 0) ||
	    !http_read_response(c, &r)) {
		if (r.error[0] == '\0')
			snprintf(r.error, sizeof(r.error), "%s", c->err);
		if (r.status == 0) {
			http_response_free(&r);
			r.body = strdup("");
		}
	}
	http_close(c);
	return r;
}

http_response http_get(int port, const char *path)
{
	return http_request(port, "GET", path, NULL, NULL);
}

http_response http_post(int port, const char *path, const char *json)
{
	return http_request(port, "POST", path, NULL, json);
}

http_conn *http_stream_open(int port, const char *path, const char *headers, const char *json, http_response *head)
{
	memset(head, 0, sizeof(*head));
	http_conn *c = http_connect(port);
	if (c == NULL) {
		snprintf(head->error, sizeof(head->error), "connect to port %d: %s", port, strerror(errno));
		return NULL;
	}
	if (!http_send(c, "POST", path, headers, json, strlen(json)) || !http_read_head(c, head)) {
		snprintf(head->error, sizeof(head->error), "%s", c->err);
		http_close(c);
		return NULL;
	}
	if (head->status != 200)
		http_read_body(c, head);
	return c;
}

double http_metric(int port, const char *name)
{
	http_response r = http_get(port, "/metrics");
	double value = NAN, sum = 0;
	bool labelled = false;
	size_t n = strlen(name);
	for (const char *p = r.status == 200 ? r.body : ""; *p != '\0';) {
		const char *eol = strchr(p, '\n');
		size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
		if (p[0] != '#' && len > n && strncmp(p, name, n) == 0) {
			if (p[n] == ' ') {
				value = strtod(p + n + 1, NULL);
				break;
			}
			if (p[n] == '{' && strchr(name, '{') == NULL) {
				const char *sp = memchr(p, ' ', len);
				const char *close = memchr(p, '}', len);
				if (sp != NULL && close != NULL && close < sp) {
					sum += strtod(sp + 1, NULL);
					labelled = true;
				}
			}
		}
		p = eol != NULL ? eol + 1 : p + len;
	}
	http_response_free(&r);
	return isnan(value) && labelled ? sum : value;
}

/* ---- JSON paths ---- */

const cJSON *json_at(const cJSON *root, const char *path)
{
	const cJSON *node = root;
	char key[128];
	for (const char *p = path; node != NULL && *p != '\0';) {
		size_t len = strcspn(p, ".");
		snprintf(key, sizeof(key), "%.*s", (int)len, p);
		char *end;
		long idx = strtol(key, &end, 10);
		if (cJSON_IsArray(node) && *end == '\0' && end != key)
			node = cJSON_GetArrayItem(node, (int)idx);
		else if (cJSON_IsObject(node))
			node = cJSON_GetObjectItemCaseSensitive(node, key);
		else
			node = NULL;
		p += len + (p[len] == '.');
	}
	return node;
}

const char *json_str(const cJSON *root, const char *path)
{
	const cJSON *n = json_at(root, path);
	return cJSON_IsString(n) ? n->valuestring : NULL;
}

double json_num(const cJSON *root, const char *path)
{
	const cJSON *n = json_at(root, path);
	return cJSON_IsNumber(n) ? n->valuedouble : NAN;
}

/* ---- Child processes ---- */

/* Children this process started, killed at exit. A Check test runs in a
 * fork of the runner, which inherits the runner's list: owner keeps each
 * process to its own children. */
#define MAX_CHILDREN 64
static struct {
	pid_t pid, owner;
} children[MAX_CHILDREN];
static int n_children;

static void kill_children(void)
{
	for (int i = 0; i < n_children; i++) {
		if (children[i].owner != getpid())
			continue;
		kill(children[i].pid, SIGKILL);
		waitpid(children[i].pid, NULL, 0);
	}
	n_children = 0;
}

static void forget_child(pid_t pid)
{
	for (int i = 0; i < n_children; i++)
		if (children[i].pid == pid) {
			children[i] = children[--n_children];
			return;
		}
}

pid_t test_spawn(const char *const argv[], int *err_fd)
{
	static bool registered;
	if (!registered) {
		atexit(kill_children);
		registered = true;
	}
	if (n_children == MAX_CHILDREN)
		return -1;
	int fds[2] = {-1, -1};
	if (err_fd != NULL && pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		if (err_fd != NULL) {
			close(fds[0]);
			close(fds[1]);
		}
		return -1;
	}
	if (pid == 0) {
		/* Dies with the test, even when the test is killed. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		if (err_fd != NULL)
			dup2(fds[1], 2);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	children[n_children].pid = pid;
	children[n_children++].owner = parent;
	if (err_fd != NULL) {
		close(fds[1]);
		fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
		fcntl(fds[0], F_SETPIPE_SZ, 1 << 20); /* room for a sanitizer's report */
		*err_fd = fds[0];
	}
	return pid;
}

static void drain(int fd, char **log)
{
	if (fd < 0)
		return;
	str s = {0};
	if (*log != NULL)
		str_add(&s, *log, strlen(*log));
	free(*log);
	char tmp[8192];
	ssize_t n;
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		str_add(&s, tmp, (size_t)n);
	*log = str_take(&s);
}

static int exit_code(int wstatus)
{
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

bool test_exited(pid_t pid, int *status)
{
	int ws;
	if (waitpid(pid, &ws, WNOHANG) != pid)
		return false;
	forget_child(pid);
	*status = exit_code(ws);
	return true;
}

int test_reap(pid_t pid, int sig, int timeout_ms, int err_fd, char **log)
{
	char *scratch = NULL;
	if (log == NULL)
		log = &scratch;
	if (sig != 0)
		kill(pid, sig);
	double until = now_ms() + timeout_ms;
	int ws = 0;
	for (;;) {
		drain(err_fd, log);
		pid_t got = waitpid(pid, &ws, WNOHANG);
		if (got == pid || (got < 0 && errno != EINTR))
			break;
		if (now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			break;
		}
		struct pollfd pfd = {.fd = err_fd, .events = POLLIN};
		poll(&pfd, err_fd >= 0 ? 1 : 0, 10);
	}
	drain(err_fd, log);
	forget_child(pid);
	free(scratch);
	return exit_code(ws);
}

void serve_drain(serve_proc *p)
{
	drain(p->err_fd, &p->log);
}

bool serve_start(serve_proc *p, const char *model, const char *const *args)
{
	const char *argv[48] = {LOOM_TEST_BUILD_DIR "/loom", "serve", "-m", model, "--port", "0",
				"--plugins", LOOM_TEST_BUILD_DIR "/plugins.yaml"};
	int n = 8;
	for (int i = 0; args != NULL && args[i] != NULL && n < 47; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	memset(p, 0, sizeof(*p));
	p->err_fd = -1;
	p->pid = test_spawn(argv, &p->err_fd);
	if (p->pid < 0) {
		p->log = strdup("cannot start the server process");
		p->pid = 0;
		return false;
	}
	/* A sanitizer build loads slowly; a minute is far more than any needs. */
	double until = now_ms() + 60000;
	static const char mark[] = "loom serve: listening on http://";
	for (;;) {
		serve_drain(p);
		const char *at = p->log != NULL ? strstr(p->log, mark) : NULL;
		if (at != NULL && strchr(at, '\n') != NULL) {
			const char *paren = strstr(at, " (");
			const char *colon = paren;
			while (colon != NULL && colon > at && *colon != ':')
				colon--;
			p->port = colon != NULL && *colon == ':' ? atoi(colon + 1) : 0;
			if (p->port > 0)
				return true;
			break;
		}
		int status;
		if (test_exited(p->pid, &status)) {
			serve_drain(p);
			str s = {0};
			str_addf(&s, "%s[the server exited with status %d before listening]\n", p->log ? p->log : "",
				 status);
			free(p->log);
			p->log = str_take(&s);
			close(p->err_fd);
			p->err_fd = -1;
			p->pid = 0;
			return false;
		}
		if (now_ms() > until)
			break;
		struct pollfd pfd = {.fd = p->err_fd, .events = POLLIN};
		poll(&pfd, 1, 20);
	}
	test_reap(p->pid, SIGKILL, 5000, p->err_fd, &p->log);
	close(p->err_fd);
	p->err_fd = -1;
	p->pid = 0;
	return false;
}

int serve_stop(serve_proc *p, int sig)
{
	if (p->pid <= 0)
		return -1;
	int status = test_reap(p->pid, sig, 60000, p->err_fd, &p->log);
	close(p->err_fd);
	p->err_fd = -1;
	p->pid = 0;
	return status;
}

void serve_proc_free(serve_proc *p)
{
	if (p->pid > 0)
		serve_stop(p, SIGKILL);
	free(p->log);
	p->log = NULL;
}

long serve_rss_kib(const serve_proc *p)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	long kib = -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int test_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	int port = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}
