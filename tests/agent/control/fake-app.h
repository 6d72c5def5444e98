/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A small app driver table for the control socket's tests (drivers/app.h promises a
 * test can slot in its own): a few apps held in memory, each with output lines that
 * the test appends while a client reads, a status that can be made to fail or to
 * take its time, and a record of the threads the driver was called on (the control
 * socket must never call it on the loop thread). Only inventory, exists, status and
 * output are filled; everything is thread-safe.
 *
 *   struct app_conn *c = fake_app_new();
 *   fake_app_add(c, "6f1c...", "minecraft", PROTO_APP_RUNNING);
 *   fake_app_line(c, "6f1c...", PROTO_APP_STDERR, "boom");
 *   services.app = &fake_app_driver; services.app_conn = c;
 *   ...
 *   fake_app_free(c);
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "drivers/app.h"

extern const struct app_driver fake_app_driver;

struct app_conn *fake_app_new(void);
void fake_app_free(struct app_conn *c);
/* name NULL: the inventory row has no name. */
void fake_app_add(struct app_conn *c, const char *id, const char *name, enum proto_app_state state);
/* The next line of the app's output (seq from 0 up; ts now). */
void fake_app_line(struct app_conn *c, const char *id, enum proto_app_stream stream, const char *text);
/* status of this app fails with DRIVER_ERROR from now on. */
void fake_app_fail_status(struct app_conn *c, const char *id);
/* Every status call sleeps this long first. */
void fake_app_status_delay_ms(struct app_conn *c, unsigned ms);
/* Whether any driver call ran on thread t; how many calls there were. */
bool fake_app_called_on(struct app_conn *c, pthread_t t);
unsigned fake_app_calls(struct app_conn *c);
