/* nodeagentd: the node agent daemon. */
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>

#include "agent/base/config.h"
#include "agent/daemon/daemon.h"
#include "agent/base/log.h"
#include "common/spawnd.h"

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
        int code = agent_run(agent);
        agent_free(agent);
        return code;
}
