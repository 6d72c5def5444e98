/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The field rules of apps: hostname, SFTP user, volume path, startedPattern, env names, signals. */
#include "proto/app-params.h"

#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "proto/decode.h"

static bool lower_or_digit(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

const char *proto_app_hostname_problem(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > PROTO_APP_HOSTNAME_MAX)
                return "must be 1..63 characters";
        bool upper = false, other = false;
        for (size_t i = 0; i < n; i++) {
                if (s[i] >= 'A' && s[i] <= 'Z')
                        upper = true;
                else if (!lower_or_digit(s[i]) && s[i] != '-')
                        other = true;
        }
        if (upper && !other)
                return "must be lowercase: it names the app in DNS and on disk";
        if (other || upper || s[0] == '-' || s[n - 1] == '-')
                return "must hold lowercase letters, digits and hyphens, and start and end with a letter or digit";
        return NULL;
}

const char *proto_app_sftp_username_problem(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > PROTO_APP_SFTP_USER_MAX)
                return "must be 1..63 characters";
        for (size_t i = 0; i < n; i++)
                if (!lower_or_digit(s[i]) && (i == 0 || (s[i] != '.' && s[i] != '_' && s[i] != '-')))
                        return "must hold lowercase letters, digits, '.', '_' and '-', and start with a letter or "
                               "digit";
        return NULL;
}

/* One side of template.user: a number 0..65535 or a user or group name. */
static const char *user_part_problem(const char *s, size_t n)
{
        if (n == 0)
                return "must not have an empty user or group";
        bool digits = true;
        for (size_t i = 0; i < n; i++)
                digits &= s[i] >= '0' && s[i] <= '9';
        if (digits) {
                unsigned long v = 0;
                for (size_t i = 0; i < n && v <= 65535; i++)
                        v = v * 10 + (unsigned long)(s[i] - '0');
                return v > 65535 ? "must have ids between 0 and 65535 (the ids an app's user namespace maps)" : NULL;
        }
        if (n > 32)
                return "must have names of at most 32 bytes";
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                          ch == '_' || ch == '.' || (ch == '-' && i > 0) || (ch == '$' && i == n - 1 && i > 0);
                if (!ok)
                        return "must be a name ([A-Za-z0-9_.-], not starting with '-') or a number, as user or "
                               "user:group";
        }
        return NULL;
}

const char *proto_app_user_problem(const char *s)
{
        if (!s || !*s)
                return "must not be empty";
        size_t n = strlen(s);
        if (n > PROTO_APP_USER_MAX)
                return "must be at most 255 bytes";
        const char *colon = strchr(s, ':');
        if (!colon)
                return user_part_problem(s, n);
        if (strchr(colon + 1, ':'))
                return "must be user or user:group (one ':')";
        const char *why = user_part_problem(s, (size_t)(colon - s));
        return why ? why : user_part_problem(colon + 1, strlen(colon + 1));
}

/* Whether path is dir or lies under it ("/proc", "/proc/x"; not "/procx"). */
static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

const char *proto_app_volume_path_problem(const char *s)
{
        if (!s || s[0] != '/')
                return "must be an absolute path";
        size_t n = strlen(s);
        if (n > PROTO_APP_VOLUME_PATH_MAX)
                return "must be at most 255 bytes";
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return "must not hold control characters";
        if (n == 1)
                return "must not be the container's root directory";
        /* Components between slashes: none empty, none "." or "..". */
        for (const char *c = s + 1;;) {
                size_t len = strcspn(c, "/");
                if (len == 0)
                        return "must not hold empty components ('//' or a trailing '/')";
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return "must not hold '.' or '..' components";
                if (c[len] == '\0')
                        break;
                c += len + 1;
        }
        if (under(s, "/proc") || under(s, "/sys") || under(s, "/dev"))
                return "must not be /proc, /sys or /dev, or lie under them: the runtime mounts those";
        return NULL;
}

#define PATTERN_DEPTH_MAX 32
#define PATTERN_COPIES_MAX 4096 /* atoms after expanding every {m,n} */
#define PATTERN_BOUND_MAX 255

/* Skip a bracket expression starting at s[i] == '['; returns the index of its ']' (or n). */
static size_t skip_bracket(const char *s, size_t n, size_t i)
{
        size_t j = i + 1;
        if (j < n && s[j] == '^')
                j++;
        if (j < n && s[j] == ']')
                j++;
        while (j < n && s[j] != ']') {
                if (s[j] == '[' && j + 1 < n && (s[j + 1] == ':' || s[j + 1] == '.' || s[j + 1] == '=')) {
                        char d = s[j + 1];
                        size_t k = j + 2;
                        while (k + 1 < n && !(s[k] == d && s[k + 1] == ']'))
                                k++;
                        if (k + 1 >= n)
                                return n;
                        j = k + 2;
                        continue;
                }
                j++;
        }
        return j;
}

/*
 * An interval at s[i] == '{' ({m}, {m,}, {m,n}, and glibc's {,n}): its largest count
 * (m for {m,}) and in *min its smallest, or -1 when the brace does not open one. On
 * success *i is the index of the closing brace.
 */
static long interval_bound(const char *s, size_t n, size_t *i, long *min)
{
        size_t j = *i + 1;
        long m = -1, hi = -1;
        bool comma = false;
        for (; j < n && s[j] >= '0' && s[j] <= '9'; j++)
                m = m < 0 ? s[j] - '0' : m > 100000 ? m : m * 10 + (s[j] - '0');
        if (j < n && s[j] == ',') {
                comma = true;
                for (j++; j < n && s[j] >= '0' && s[j] <= '9'; j++)
                        hi = hi < 0 ? s[j] - '0' : hi > 100000 ? hi : hi * 10 + (s[j] - '0');
        }
        if ((m < 0 && !comma) || j >= n || s[j] != '}')
                return -1;
        *i = j;
        *min = m < 0 ? 0 : m;
        if (comma && hi < 0)
                return *min; /* {m,}: m copies, then a star */
        return comma ? (hi > *min ? hi : *min) : *min;
}

/* What the scan knows about one level of groups. */
struct level {
        uint64_t size;    /* atoms so far, repetitions expanded */
        bool alt_empty;   /* a finished branch matches the empty string */
        bool pre_empty;   /* every item before the last one matches the empty string */
        bool has_last;
        bool last_empty;  /* the last item matches the empty string */
        uint64_t last;    /* atoms of the last item */
};

static void level_item(struct level *l, uint64_t atoms, bool empty)
{
        l->pre_empty = l->pre_empty && (!l->has_last || l->last_empty);
        l->has_last = true;
        l->last_empty = empty;
        l->last = atoms;
        l->size += atoms;
}

/*
 * glibc's regcomp copies a group once per count of an interval, recurses once per
 * nested group, and spends seconds on repetitions of what can match the empty string
 * ("(a*)*{255}" takes 0.3 s, "a**...*{255}" 20 s): bound all three before compiling.
 * Matching such patterns costs as much, so refusing them loses nothing of use.
 */
static const char *pattern_shape_problem(const char *s)
{
        size_t n = strlen(s), depth = 0;
        struct level lv[PATTERN_DEPTH_MAX + 1] = { { .pre_empty = true } };
        bool quantified = false; /* the last item already carries *, +, ? or {m,n} */
        for (size_t i = 0; i < n; i++) {
                struct level *l = &lv[depth];
                char c = s[i];
                long min = 0, bound = c == '{' ? interval_bound(s, n, &i, &min) : -1;
                bool quantifier = c == '*' || c == '+' || c == '?' || bound >= 0;
                if (quantifier && quantified)
                        return "must not put two repetitions one after the other (\"a**\", \"a+{2}\")";
                quantified = quantifier;
                if (quantifier && l->has_last) {
                        if (l->last_empty && c != '?' && (bound < 0 || bound > 1))
                                return "must not repeat what can match the empty string (\"(a*)*\", \"(a|b?){9}\")";
                        if (bound > PATTERN_BOUND_MAX)
                                return "must not repeat more than 255 times in an interval {m,n}";
                        uint64_t copies = c == '+' ? 2 : bound > 1 ? (uint64_t)bound : 1;
                        l->size += l->last * (copies - 1) + 1; /* the copies and the repetition node */
                        l->last = l->last * copies + 1;
                        l->last_empty = l->last_empty || c == '*' || c == '?' || (bound >= 0 && min == 0);
                } else if (quantifier) {
                        continue; /* nothing to repeat: regcomp decides */
                } else if (c == '\\') {
                        if (i + 1 < n && s[i + 1] >= '1' && s[i + 1] <= '9')
                                return "must not use back-references (\\1..\\9): they make matching exponential";
                        i++;
                        level_item(l, 1, false);
                } else if (c == '[') {
                        i = skip_bracket(s, n, i);
                        level_item(l, 1, false);
                } else if (c == '^' || c == '$') {
                        level_item(l, 1, true);
                } else if (c == '|') {
                        l->alt_empty = l->alt_empty || (l->pre_empty && (!l->has_last || l->last_empty));
                        l->pre_empty = true;
                        l->has_last = false;
                } else if (c == '(') {
                        if (depth == PATTERN_DEPTH_MAX)
                                return "must not nest groups more than 32 deep";
                        lv[++depth] = (struct level){ .pre_empty = true };
                } else if (c == ')' && depth > 0) {
                        bool empty = l->alt_empty || (l->pre_empty && (!l->has_last || l->last_empty));
                        uint64_t atoms = l->size + 1;
                        depth--;
                        level_item(&lv[depth], atoms, empty);
                } else {
                        level_item(l, 1, false);
                }
                if (lv[depth].size > PATTERN_COPIES_MAX || lv[depth].last > PATTERN_COPIES_MAX)
                        return "must not expand to more than 4096 atoms once its intervals {m,n} are repeated";
        }
        return NULL;
}

const char *proto_app_pattern_problem(const char *s)
{
        if (!s || !*s)
                return "must not be empty";
        if (proto_utf8_chars(s) > PROTO_APP_PATTERN_MAX)
                return "must be at most 1024 characters";
        const char *why = pattern_shape_problem(s);
        if (why)
                return why;
        regex_t re;
        if (regcomp(&re, s, REG_EXTENDED | REG_NOSUB) != 0)
                return "must be a POSIX extended regular expression";
        regfree(&re);
        return NULL;
}

bool proto_app_env_name_valid(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n < 1 || n > PROTO_APP_ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
                        return false;
        }
        return true;
}

static const char *const signal_names[] = {
        [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",       [SIGQUIT] = "SIGQUIT",     [SIGILL] = "SIGILL",
        [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT",     [SIGBUS] = "SIGBUS",       [SIGFPE] = "SIGFPE",
        [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1",     [SIGSEGV] = "SIGSEGV",     [SIGUSR2] = "SIGUSR2",
        [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM",     [SIGTERM] = "SIGTERM",     [SIGSTKFLT] = "SIGSTKFLT",
        [SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT",     [SIGSTOP] = "SIGSTOP",     [SIGTSTP] = "SIGTSTP",
        [SIGTTIN] = "SIGTTIN", [SIGTTOU] = "SIGTTOU",     [SIGURG] = "SIGURG",       [SIGXCPU] = "SIGXCPU",
        [SIGXFSZ] = "SIGXFSZ", [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",     [SIGWINCH] = "SIGWINCH",
        [SIGIO] = "SIGIO",     [SIGPWR] = "SIGPWR",       [SIGSYS] = "SIGSYS",
};

const char *proto_app_signal_name(int sig)
{
        if (sig <= 0 || (size_t)sig >= ARRAY_SIZE(signal_names))
                return NULL;
        return signal_names[sig];
}

bool proto_app_stop_signal_allowed(int sig)
{
        return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGKILL || sig == SIGUSR1 ||
               sig == SIGUSR2 || sig == SIGTERM;
}

int proto_app_signal_parse(const char *s)
{
        if (!s || !*s)
                return 0;
        if (strspn(s, "0123456789") == strlen(s)) {
                int n = strlen(s) <= 2 ? atoi(s) : 0;
                return proto_app_signal_name(n) ? n : 0;
        }
        for (int i = 1; i < (int)ARRAY_SIZE(signal_names); i++) {
                const char *name = signal_names[i];
                if (name && (strcmp(name, s) == 0 || strcmp(name + 3, s) == 0))
                        return i;
        }
        return 0;
}
