/* SPDX-License-Identifier: GPL-2.0-or-later */
/* nodeagentd: the node agent daemon. */
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/base/config.h"
#include "agent/daemon/daemon.h"
#include "agent/base/log.h"
#include "common/spawnd.h"

/*
 * The OOM order (issue 20): the agent and everything it starts (its exec helper, each
 * app's nodeagent-monitor, nodeagent-sftpd, qemu-img) inherit this oom_score_adj, so a
 * node short of memory kills a customer's container (APP_OCI_OOM_SCORE_ADJ, 1000)
 * first. Under systemd, nodeagent.service's OOMScoreAdjust=-900 has set it already and
 * a drop-in decides (the unit drops CAP_SYS_RESOURCE: nothing lower can be set here);
 * started otherwise as root, the agent lowers itself. Never raised.
 */
#define AGENT_OOM_SCORE_ADJ (-900)

/* Fills why (when it is not empty) with what to log once the start is past its refusals. */
static void oom_protect(char *why, size_t wlen)
{
        int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return;
        char buf[16] = "";
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n > 0 && atoi(buf) > AGENT_OOM_SCORE_ADJ) {
                char v[16];
                int len = snprintf(v, sizeof(v), "%d", AGENT_OOM_SCORE_ADJ);
                if (pwrite(fd, v, (size_t)len, 0) != len)
                        snprintf(why, wlen, "oom_score_adj stays %d (setting %d: %s): the OOM killer may pick the "
                                 "agent before an app", atoi(buf), AGENT_OOM_SCORE_ADJ, strerror(errno));
        }
        close(fd);
}

static void usage(FILE *f)
{
        fprintf(f, "Usage: nodeagentd [-c FILE] [--check-config] [--version]\n"
                   "  -c, --config FILE   configuration (default " NA_DEFAULT_CONFIG ")\n"
                   "      --check-config  validate the configuration, print every problem, exit 2 if any\n"
                   "      --version       print the version and exit\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "check-config", no_argument, NULL, 'k' },
                { "version", no_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        /* Workers allocate little: one malloc arena per thread would only waste memory. */
        mallopt(M_ARENA_MAX, 2);
        const char *path = NA_DEFAULT_CONFIG;
        bool check = false;
        int c;
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        path = optarg;
                        break;
                case 'k':
                        check = true;
                        break;
                case 'V':
                        printf("nodeagentd %s\n", NA_VERSION);
                        return 0;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                usage(stderr);
                return 2;
        }

        struct agent_config *cfg = NULL;
        struct na_error err = NA_ERROR_INIT;
        unsigned problems = 0;
        if (config_load(path, stderr, &problems, &cfg, &err) < 0) {
                fprintf(stderr, "%s:0: config: %s\n", path, err.message);
                na_error_clear(&err);
                return 2;
        }
        if (problems) {
                config_free(cfg);
                if (!check)
                        fprintf(stderr, "nodeagentd: %u problem(s) in %s; not starting\n", problems, path);
                return 2;
        }
        if (check) {
                printf("%s: ok\n", path);
                config_free(cfg);
                return 0;
        }

        char oom_why[256] = "";
        oom_protect(oom_why, sizeof(oom_why)); /* before anything is forked: they all inherit it */
        /* The exec helper must be forked while the process has one thread and no filter. */
        if (config_sandbox(cfg) == AGENT_SANDBOX_STRICT && na_spawnd_start(NULL, &err) < 0) {
                log_error("cannot start: %s", err.message);
                na_error_clear(&err);
                config_free(cfg);
                return 1;
        }
        struct agent *agent = NULL;
        int r = agent_new(cfg, &agent, &err);
        if (r < 0) {
                log_error("cannot start: %s", err.message);
                na_error_clear(&err);
                /* A state directory of a format this version does not know (agent_new says
                 * so with -EPROTONOSUPPORT): like a bad configuration, restarting cannot fix
                 * it, so the unit's RestartPreventExitStatus=2 applies. */
                return r == -EPROTONOSUPPORT ? 2 : 1;
        }
        /* Said once the start is past its refusals (each of those is one line on stderr). */
        if (oom_why[0])
                log_warn("%s", oom_why);
        int code = agent_run(agent);
        agent_free(agent);
        return code;
}
