/* http.c - the HTTP side of `loom serve`, on libmicrohttpd. One thread
 * runs every connection from an epoll loop and never blocks: a request
 * that waits for the model has its connection suspended, and the scheduler
 * resumes it when output is ready. A slow or idle client therefore holds
 * only its own socket (idle ones are closed after SERVE_IDLE_TIMEOUT_S),
 * never a worker thread others need. */
#include "serve.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

typedef enum route_id {
	ROUTE_HEALTH,
	ROUTE_MODELS,
	ROUTE_METRICS,
	ROUTE_COMPLETIONS,
	ROUTE_CHAT,
	ROUTE_EMBEDDINGS,
	ROUTE_TOKENIZE,
	ROUTE_DETOKENIZE,
} route_id;

typedef struct route {
	const char *path;
	const char *method;
	route_id id;
} route;

static const route routes[] = {
	{"/health", "GET", ROUTE_HEALTH},
	{"/v1/models", "GET", ROUTE_MODELS},
	{"/models", "GET", ROUTE_MODELS},
	{"/metrics", "GET", ROUTE_METRICS},
	{"/v1/completions", "POST", ROUTE_COMPLETIONS},
	{"/completions", "POST", ROUTE_COMPLETIONS},
	{"/v1/chat/completions", "POST", ROUTE_CHAT},
	{"/chat/completions", "POST", ROUTE_CHAT},
	{"/v1/embeddings", "POST", ROUTE_EMBEDDINGS},
	{"/embeddings", "POST", ROUTE_EMBEDDINGS},
	{"/tokenize", "POST", ROUTE_TOKENIZE},
	{"/detokenize", "POST", ROUTE_DETOKENIZE},
};

/* One HTTP request on a connection. */
typedef struct exchange {
	serve_server *s;
	struct MHD_Connection *conn;
	const route *route;
	serve_buf body;
	bool too_large;
	serve_request *req; /* once queued */
	size_t sent;        /* bytes of req->out already handed to MHD */
} exchange;

static void count_error(serve_server *s, unsigned status)
{
	static const unsigned codes[] = {400, 401, 404, 405, 413, 503};
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i] == status)
			s->metrics.http_errors[i]++;
	pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *type, const char *text,
				 size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* A JSON body (malloc'd; freed here); NULL means out of memory. */
static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, char *json)
{
	if (json == NULL)
		return send_text(conn, 500, "application/json",
				 "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
				 83);
	enum MHD_Result ret = send_text(conn, status, "application/json", json, strlen(json));
	free(json);
	return ret;
}

static enum MHD_Result send_error(exchange *x, unsigned status, const char *message, const char *param,
				  const char *code)
{
	const char *type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
	count_error(x->s, status);
	if (status == 405) {
		char *json = serve_reply_error(message, type, param, code);
		if (json == NULL)
			return MHD_NO;
		struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
		if (resp == NULL) {
			free(json);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, x->route->method);
		enum MHD_Result ret = MHD_queue_response(x->conn, status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	return send_json(x->conn, status, serve_reply_error(message, type, param, code));
}

/* Compares every byte of the key whatever the other side holds, so the
 * time taken says nothing about how much of a guess was right. */
static bool key_matches(const char *given, const char *key)
{
	size_t n = strlen(key), g = strlen(given);
	unsigned char diff = n != g;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)key[i] ^ (unsigned char)(i < g ? given[i] : 0);
	return diff == 0;
}

static bool authorized(serve_server *s, struct MHD_Connection *conn)
{
	if (s->cfg.api_key == NULL)
		return true;
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	while (*h == ' ')
		h++;
	return key_matches(h, s->cfg.api_key);
}

static enum MHD_Result refuse_too_large(exchange *x)
{
	char msg[120];
	snprintf(msg, sizeof(msg), "the body is over the limit of %u bytes", SERVE_MAX_BODY);
	return send_error(x, 413, msg, NULL, "request_too_large");
}

static enum MHD_Result answer_get(exchange *x)
{
	serve_server *s = x->s;
	switch (x->route->id) {
	case ROUTE_HEALTH: {
		pthread_mutex_lock(&s->lock);
		bool draining = s->draining;
		char json[160];
		snprintf(json, sizeof(json), "{\"status\":\"%s\",\"slots_busy\":%d,\"slots_total\":%d,\"queued\":%d}",
			 draining ? "shutting down" : "ok", s->n_running, s->cfg.n_slots, s->queue_len);
		pthread_mutex_unlock(&s->lock);
		return send_text(x->conn, draining ? 503 : 200, "application/json", json, strlen(json));
	}
	case ROUTE_MODELS:
		return send_json(x->conn, 200, serve_reply_models(s));
	case ROUTE_METRICS: {
		char *text = serve_metrics_text(s);
		if (text == NULL)
			return send_json(x->conn, 500, NULL);
		enum MHD_Result ret = send_text(x->conn, 200, "text/plain; version=0.0.4", text, strlen(text));
		free(text);
		return ret;
	}
	default:
		return MHD_NO;
	}
}

/* Streams req->out as it fills: what is there now, else the connection
 * sleeps until the scheduler has more. */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	exchange *x = cls;
	serve_request *r = x->req;
	(void)pos;
	pthread_mutex_lock(&x->s->lock);
	ssize_t n;
	if (r->out.len > x->sent) {
		size_t avail = r->out.len - x->sent;
		size_t take = avail < max ? avail : max;
		memcpy(buf, r->out.data + x->sent, take);
		x->sent += take;
		if (x->sent == r->out.len)
			r->out.len = x->sent = 0;
		n = (ssize_t)take;
	} else if (r->state == SERVE_DONE) {
		n = r->client_gone ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		r->suspended = true;
		MHD_suspend_connection(x->conn);
		n = 0;
	}
	pthread_mutex_unlock(&x->s->lock);
	return n;
}

/* The connection of a queued request woke: start its reply if the
 * scheduler has decided it, else sleep again. */
static enum MHD_Result answer_queued(exchange *x)
{
	serve_server *s = x->s;
	serve_request *r = x->req;
	pthread_mutex_lock(&s->lock);
	if (r->status == 0 && r->state != SERVE_DONE) {
		r->suspended = true;
		MHD_suspend_connection(x->conn);
		pthread_mutex_unlock(&s->lock);
		return MHD_YES;
	}
	enum MHD_Result ret;
	if (r->stream && r->status == 200) {
		pthread_mutex_unlock(&s->lock);
		struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_stream, x, NULL);
		if (resp == NULL)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		/* nginx and other proxies pass events on as they come. */
		MHD_add_response_header(resp, "X-Accel-Buffering", "no");
		ret = MHD_queue_response(x->conn, 200, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	unsigned status = r->status != 0 ? (unsigned)r->status : 500;
	char *body = r->out.len > 0 ? strndup(r->out.data, r->out.len) : NULL;
	r->out.len = 0;
	pthread_mutex_unlock(&s->lock);
	if (status != 200)
		count_error(s, status);
	if (body == NULL)
		return send_json(x->conn, 500, serve_reply_error("the request was cancelled", "server_error", NULL, NULL));
	return send_json(x->conn, status, body);
}

static enum MHD_Result queue_request(exchange *x, serve_request *r)
{
	serve_server *s = x->s;
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	pthread_mutex_lock(&s->lock);
	bool draining = s->draining, queued = !draining && serve_enqueue(s, r);
	if (queued) {
		r->conn = x->conn;
		r->fd = info != NULL ? info->connect_fd : -1;
		r->suspended = true;
		x->req = r;
		MHD_suspend_connection(x->conn);
	}
	pthread_mutex_unlock(&s->lock);
	if (queued)
		return MHD_YES;
	serve_request_unref(r);
	return send_error(x, 503, draining ? "the server is shutting down" : "the server is busy: its queue is full",
			  NULL, draining ? "shutting_down" : "server_busy");
}

static enum MHD_Result answer_post(exchange *x)
{
	serve_server *s = x->s;
	const char *body = x->body.data != NULL ? x->body.data : "";
	char *err = NULL, *reply = NULL;
	const char *param = NULL;
	int status;
	route_id id = x->route->id;
	if (id == ROUTE_TOKENIZE || id == ROUTE_DETOKENIZE) {
		status = id == ROUTE_TOKENIZE ? serve_parse_tokenize(s, body, x->body.len, &reply, &err)
					      : serve_parse_detokenize(s, body, x->body.len, &reply, &err);
		if (status == 0)
			return send_json(x->conn, 200, reply);
	} else {
		serve_kind kind = id == ROUTE_CHAT ? SERVE_CHAT : id == ROUTE_EMBEDDINGS ? SERVE_EMBEDDING : SERVE_COMPLETION;
		serve_request *r = serve_request_new(kind);
		if (r == NULL)
			return send_json(x->conn, 500, NULL);
		status = kind == SERVE_EMBEDDING ? serve_parse_embedding(s, body, x->body.len, r, &err, &param)
						 : serve_parse_completion(s, body, x->body.len, kind, r, &err, &param);
		if (status == 0)
			return queue_request(x, r);
		serve_request_unref(r);
	}
	const char *code = err != NULL && strstr(err, "context holds") != NULL ? "context_length_exceeded" : NULL;
	enum MHD_Result ret = send_error(x, (unsigned)status, err != NULL ? err : "out of memory", param, code);
	free(err);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	serve_server *s = cls;
	exchange *x = *con_cls;
	(void)version;
	if (x == NULL) {
		if ((x = calloc(1, sizeof(*x))) == NULL)
			return MHD_NO;
		x->s = s;
		x->conn = conn;
		*con_cls = x;
		const route *same_path = NULL;
		for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && x->route == NULL; i++) {
			if (strcmp(url, routes[i].path) != 0)
				continue;
			same_path = &routes[i];
			if (strcmp(method, routes[i].method) == 0 ||
			    (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0))
				x->route = &routes[i];
		}
		if (x->route == NULL && same_path != NULL) {
			x->route = same_path;
			char msg[160];
			snprintf(msg, sizeof(msg), "%s takes %s, not %s", url, same_path->method, method);
			return send_error(x, 405, msg, NULL, "method_not_allowed");
		}
		if (x->route == NULL) {
			char msg[300];
			snprintf(msg, sizeof(msg), "no route %s %.200s", method, url);
			return send_error(x, 404, msg, NULL, "not_found");
		}
		if (x->route->id != ROUTE_HEALTH && !authorized(s, conn))
			return send_error(x, 401, "a valid API key is required (Authorization: Bearer KEY)", NULL,
					  "invalid_api_key");
		const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		const unsigned long long n = length != NULL ? strtoull(length, NULL, 10) : 0;
		if (n > SERVE_MAX_BODY) {
			/* A client waiting for 100 Continue has sent nothing yet,
			 * and a body past SERVE_MAX_DRAIN is not worth reading:
			 * refused now. Any other over-limit body is read and
			 * dropped, its 413 sent once it is in, so that a client
			 * that writes its whole body before reading gets its 413
			 * rather than a reset (what nginx's lingering close is
			 * for). */
			const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
			if ((expect != NULL && strcasecmp(expect, "100-continue") == 0) || n > SERVE_MAX_DRAIN)
				return refuse_too_large(x);
			x->too_large = true;
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (x->too_large || x->body.len + *upload_data_size > SERVE_MAX_BODY) {
			x->too_large = true;
		} else if (!serve_buf_append(&x->body, upload_data, *upload_data_size)) {
			return MHD_NO;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (x->req != NULL)
		return answer_queued(x);
	if (strcmp(x->route->method, "GET") == 0)
		return answer_get(x);
	if (x->too_large)
		return refuse_too_large(x);
	return answer_post(x);
}

/* The connection is done with this request, whether the reply went out or
 * the client left: a request still running is dropped at the next step. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	serve_server *s = cls;
	exchange *x = *con_cls;
	(void)conn;
	(void)toe;
	if (x == NULL)
		return;
	if (x->req != NULL) {
		pthread_mutex_lock(&s->lock);
		serve_request *r = x->req;
		if (r->state != SERVE_DONE)
			r->client_gone = true;
		r->conn = NULL;
		r->fd = -1;
		r->suspended = false;
		serve_request_unref(r);
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
	}
	serve_buf_free(&x->body);
	free(x);
	*con_cls = NULL;
}

void serve_http_resume(serve_request *r)
{
	if (r->suspended && r->conn != NULL) {
		r->suspended = false;
		MHD_resume_connection(r->conn);
	}
}

bool serve_http_start(serve_server *s)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", s->cfg.port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(s->cfg.host, port, &hints, &ai);
	if (gai != 0) {
		fprintf(stderr, "loom: serve: cannot resolve --host %s: %s\n", s->cfg.host, gai_strerror(gai));
		return false;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s->daemon = MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
				     ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONNECTIONS,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_IDLE_TIMEOUT_S,
				     MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (s->daemon == NULL) {
		fprintf(stderr, "loom: serve: cannot listen on %s:%d\n", s->cfg.host, s->cfg.port);
		return false;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	if (info != NULL)
		s->cfg.port = info->port;
	return true;
}

void serve_http_quiesce(serve_server *s)
{
	if (s->daemon != NULL) {
		MHD_socket fd = MHD_quiesce_daemon(s->daemon);
		if (fd != MHD_INVALID_SOCKET)
			close(fd);
	}
}

void serve_http_stop(serve_server *s)
{
	if (s->daemon != NULL)
		MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
}
