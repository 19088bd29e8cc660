/* test_fleet.c - two `loom serve` instances behind nginx (least_conn), as
 * a fleet is run: requests spread over both; when one is killed in the
 * middle of streams, only its own streams fail; nginx then routes round it.
 * The tcase's fixture starts both servers (--port 0) and nginx (Debian's
 * /usr/sbin/nginx, in the foreground, its files in a directory of the
 * build tree), and stops them all. */
#define _GNU_SOURCE /* vasprintf */
#include "check_main.h"
#include "http_client.h"
#include "testdata.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MODEL "stories260K-f32.gguf"
#define NGINX "/usr/sbin/nginx"

static char model_file[4096];
static char dir[4096];
static serve_proc loom[2];
static pid_t nginx_pid;
static int nginx_err = -1;
static int port;        /* nginx's */
static char *why_down;  /* what went wrong starting the fleet */

static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *format(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s == NULL)
		abort();
	return s;
}

static bool write_config(const char *path)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return false;
	fprintf(f,
		"daemon off;\n"
		"master_process off;\n"
		"worker_processes 1;\n"
		"error_log %s/error.log warn;\n"
		"pid %s/nginx.pid;\n"
		"events { worker_connections 256; }\n"
		"http {\n"
		"  access_log off;\n"
		"  client_body_temp_path %s/client_body;\n"
		"  proxy_temp_path %s/proxy;\n"
		"  fastcgi_temp_path %s/fastcgi;\n"
		"  uwsgi_temp_path %s/uwsgi;\n"
		"  scgi_temp_path %s/scgi;\n"
		"  upstream loom {\n"
		"    least_conn;\n"
		"    server 127.0.0.1:%d max_fails=1 fail_timeout=10s;\n"
		"    server 127.0.0.1:%d max_fails=1 fail_timeout=10s;\n"
		"  }\n"
		"  server {\n"
		"    listen 127.0.0.1:%d;\n"
		"    location / {\n"
		"      proxy_pass http://loom;\n"
		"      proxy_http_version 1.1;\n"
		"      proxy_set_header Connection \"\";\n"
		"      proxy_buffering off;\n"
		"      proxy_read_timeout 60s;\n"
		"    }\n"
		"  }\n"
		"}\n",
		dir, dir, dir, dir, dir, dir, dir, loom[0].port, loom[1].port, port);
	return fclose(f) == 0;
}

static void fleet_down(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fleet_down(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&why_down, fmt, ap) < 0)
		why_down = NULL;
	va_end(ap);
}

/* nginx, once its port accepts connections. */
static bool start_nginx(void)
{
	char conf[4200];
	snprintf(conf, sizeof(conf), "%s/nginx.conf", dir);
	port = test_free_port();
	if (port <= 0 || !write_config(conf)) {
		fleet_down("cannot write %s", conf);
		return false;
	}
	const char *argv[] = {NGINX, "-p", dir, "-c", conf, NULL};
	nginx_pid = test_spawn(argv, &nginx_err);
	if (nginx_pid < 0) {
		nginx_pid = 0;
		fleet_down("cannot start nginx");
		return false;
	}
	for (double until = now_s() + 20; now_s() < until; pause_ms(20)) {
		http_conn *c = http_connect(port);
		if (c != NULL) {
			http_close(c);
			return true;
		}
		int status;
		if (test_exited(nginx_pid, &status)) {
			char *log = NULL, path[4200];
			test_reap(nginx_pid, 0, 0, nginx_err, &log);
			snprintf(path, sizeof(path), "%s/error.log", dir);
			char *error_log = test_read_file(path, NULL);
			fleet_down("nginx exited with status %d:\n%s%s", status, log ? log : "", error_log ? error_log : "");
			free(log);
			free(error_log);
			nginx_pid = 0;
			return false;
		}
	}
	fleet_down("nginx did not listen on port %d", port);
	return false;
}

static void fleet_setup(void)
{
	static const char *const args[] = {"-np", "8", "-c", "8192", "-t", "1", NULL};
	why_down = NULL;
	if (!test_data_path(model_file, sizeof(model_file), "models/" MODEL) || access(NGINX, X_OK) != 0)
		return;
	const char *tmp = test_tmp_dir("fleet");
	if (tmp == NULL) {
		fleet_down("cannot make the test directory");
		return;
	}
	snprintf(dir, sizeof(dir), "%s", tmp);
	for (int i = 0; i < 2; i++)
		if (!serve_start(&loom[i], model_file, args)) {
			fleet_down("loom serve %d did not start:\n%s", i, loom[i].log);
			return;
		}
	start_nginx();
}

static void fleet_teardown(void)
{
	if (nginx_pid > 0) {
		int status = test_reap(nginx_pid, SIGTERM, 10000, nginx_err, NULL);
		if (status != 0)
			fprintf(stderr, "nginx exited with status %d\n", status);
	}
	if (nginx_err >= 0)
		close(nginx_err);
	for (int i = 0; i < 2; i++) {
		serve_stop(&loom[i], SIGTERM);
		serve_proc_free(&loom[i]);
	}
	free(why_down);
}

/* In a test: false (after SKIP) without the model or nginx; fails if the
 * fleet did not start. */
static bool fleet_ready(void)
{
	if (!test_data_path(model_file, sizeof(model_file), "models/" MODEL)) {
		printf("SKIP: no %s in the reference data\n", MODEL);
		return false;
	}
	if (access(NGINX, X_OK) != 0) {
		printf("SKIP: no %s (scripts/deps.sh installs nginx-light)\n", NGINX);
		return false;
	}
	ck_assert_msg(why_down == NULL && nginx_pid > 0, "the fleet did not start: %s", why_down ? why_down : "?");
	return true;
}

/* Requests each server took (from its own /metrics). */
static double served(int i)
{
	return http_metric(loom[i].port, "loom_requests_total");
}

/* ---- (a) requests spread over both ---- */

#define N_THREADS 8
#define PER_THREAD 4

typedef struct worker {
	int index;
	int status[PER_THREAD];
	char error[200];
} worker;

static void *send_requests(void *arg)
{
	worker *w = arg;
	for (int k = 0; k < PER_THREAD; k++) {
		char *body = format("{\"prompt\":\"Story %d of %d: once upon a time\",\"max_tokens\":8}", k, w->index);
		http_response r = http_post(port, "/v1/completions", body);
		w->status[k] = r.status;
		if (r.status != 200 && w->error[0] == '\0')
			snprintf(w->error, sizeof(w->error), "%d %.120s%s", r.status, r.body ? r.body : "", r.error);
		http_response_free(&r);
		free(body);
	}
	return NULL;
}

/* 32 requests from 8 threads through nginx all succeed, and both servers
 * served some of them. */
START_TEST(requests_spread_over_both)
{
	if (!fleet_ready())
		return;
	double before[2] = {served(0), served(1)};
	worker w[N_THREADS];
	pthread_t t[N_THREADS];
	for (int i = 0; i < N_THREADS; i++) {
		w[i] = (worker){.index = i};
		ck_assert(pthread_create(&t[i], NULL, send_requests, &w[i]) == 0);
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N_THREADS; i++)
		for (int k = 0; k < PER_THREAD; k++)
			ck_assert_msg(w[i].status[k] == 200, "thread %d, request %d: %s", i, k, w[i].error);
	double n0 = served(0) - before[0], n1 = served(1) - before[1];
	printf("fleet: %.0f and %.0f of %d requests\n", n0, n1, N_THREADS * PER_THREAD);
	ck_assert_msg(n0 + n1 == N_THREADS * PER_THREAD, "the servers counted %.0f + %.0f requests", n0, n1);
	ck_assert_msg(n0 > 0 && n1 > 0, "one server took them all: %.0f and %.0f", n0, n1);
}
END_TEST

/* ---- (b) one server killed mid-stream ---- */

#define N_STREAMS 8

/* 8 long streams through nginx; SIGKILL one server: the streams it held end
 * without [DONE], the others complete. */
START_TEST(killing_one_fails_only_its_streams)
{
	if (!fleet_ready())
		return;
	http_conn *s[N_STREAMS];
	for (int i = 0; i < N_STREAMS; i++) {
		http_response head;
		char *body = format("{\"prompt\":\"Stream %d: once upon a time\",\"max_tokens\":1000,\"temperature\":0,"
				    "\"stream\":true}", i);
		s[i] = http_stream_open(port, "/v1/completions", NULL, body, &head);
		ck_assert_msg(s[i] != NULL && head.status == 200, "stream %d: %d %s%s", i, head.status,
			      head.body ? head.body : "", head.error);
		char *ev = http_next_event(s[i]);
		ck_assert_msg(ev != NULL && strcmp(ev, "[DONE]") != 0, "stream %d: no first event: %s", i, http_error(s[i]));
		free(ev);
		http_response_free(&head);
		free(body);
	}
	double busy[2] = {http_metric(loom[0].port, "loom_slots_busy"), http_metric(loom[1].port, "loom_slots_busy")};
	ck_assert_msg(busy[0] + busy[1] == N_STREAMS && busy[0] > 0 && busy[1] > 0,
		      "streams running on the servers: %g and %g", busy[0], busy[1]);
	ck_assert_int_eq(kill(loom[0].pid, SIGKILL), 0);

	int failed = 0, completed = 0;
	for (int i = 0; i < N_STREAMS; i++) {
		bool done = false, after_done = false;
		int events = 0;
		char *ev;
		while ((ev = http_next_event(s[i])) != NULL) {
			after_done = after_done || done;
			done = strcmp(ev, "[DONE]") == 0;
			events++;
			free(ev);
		}
		ck_assert_msg(!after_done, "stream %d: events after [DONE]", i);
		if (done && http_stream_ended(s[i]))
			completed++;
		else
			failed++;
		http_close(s[i]);
	}
	printf("fleet: %d streams failed with the killed server (it held %g), %d completed (the other held %g)\n", failed,
	       busy[0], completed, busy[1]);
	ck_assert_msg(failed == (int)busy[0] && completed == (int)busy[1],
		      "%d streams failed and %d completed; the killed server held %g, the other %g", failed, completed,
		      busy[0], busy[1]);
}
END_TEST

/* ---- (c) nginx routes round the dead one ---- */

/* With one server dead (killed here unless the test before did), 16 more
 * requests all succeed, all served by the other. */
START_TEST(requests_go_round_the_dead_one)
{
	if (!fleet_ready())
		return;
	kill(loom[0].pid, SIGKILL);
	for (double until = now_s() + 10; now_s() < until; pause_ms(20)) {
		http_conn *c = http_connect(loom[0].port);
		if (c == NULL)
			break;
		http_close(c);
	}
	http_conn *c = http_connect(loom[0].port);
	ck_assert_msg(c == NULL && errno == ECONNREFUSED, "the killed server still accepts connections");
	double before = served(1);
	for (int i = 0; i < 16; i++) {
		char *body = format("{\"prompt\":\"After %d: once upon a time\",\"max_tokens\":8}", i);
		http_response r = http_post(port, "/v1/completions", body);
		ck_assert_msg(r.status == 200, "request %d: %d %.200s%s", i, r.status, r.body ? r.body : "", r.error);
		http_response_free(&r);
		free(body);
	}
	ck_assert_msg(served(1) - before == 16, "the live server served %.0f of 16", served(1) - before);
}
END_TEST

static Suite *fleet_suite(void)
{
	Suite *s = suite_create("fleet");
	TCase *tc = tcase_create("nginx");
	tcase_add_unchecked_fixture(tc, fleet_setup, fleet_teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, requests_spread_over_both);
	tcase_add_test(tc, killing_one_fails_only_its_streams);
	tcase_add_test(tc, requests_go_round_the_dead_one);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(fleet_suite)
