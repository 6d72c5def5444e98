/* The field rules of apps: hostname, SFTP user, volume path, startedPattern, env names, signals. */
#include "proto/app.h"

#include <regex.h>
#include <signal.h>
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
 * (m for {m,}), or -1 when the brace does not open one.
 */
static long interval_bound(const char *s, size_t n, size_t *i)
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
        return m > hi ? (m < 0 ? 0 : m) : hi;
}

/*
 * glibc's regcomp copies a group once per count of an interval and recurses once per
 * nested group: bound both before compiling so that a 1 KiB pattern cannot cost
 * gigabytes or the stack ("((a{255}){255}){255}").
 */
static const char *pattern_shape_problem(const char *s)
{
        size_t n = strlen(s), depth = 0;
        uint64_t size[PATTERN_DEPTH_MAX + 1] = { 0 }, last = 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '\\') {
                        if (i + 1 < n && s[i + 1] >= '1' && s[i + 1] <= '9')
                                return "must not use back-references (\\1..\\9): they make matching exponential";
                        i++;
                        last = 1;
                        size[depth]++;
                } else if (c == '[') {
                        i = skip_bracket(s, n, i);
                        last = 1;
                        size[depth]++;
                } else if (c == '(') {
                        if (depth == PATTERN_DEPTH_MAX)
                                return "must not nest groups more than 32 deep";
                        size[++depth] = 0;
                        last = 0;
                } else if (c == ')' && depth > 0) {
                        last = size[depth--];
                        size[depth] += last;
                } else if (c == '{') {
                        long bound = interval_bound(s, n, &i);
                        if (bound < 0) {
                                last = 1;
                                size[depth]++;
                                continue;
                        }
                        if (bound > PATTERN_BOUND_MAX)
                                return "must not repeat more than 255 times in an interval {m,n}";
                        if (bound > 1)
                                size[depth] += last * (uint64_t)(bound - 1);
                        last *= (uint64_t)(bound ? bound : 1);
                } else if (c == '*' || c == '?' || c == '|') {
                        continue;
                } else if (c == '+') {
                        size[depth] += last; /* a+ is aa* */
                } else {
                        last = 1;
                        size[depth]++;
                }
                if (size[depth] > PATTERN_COPIES_MAX || last > PATTERN_COPIES_MAX)
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
