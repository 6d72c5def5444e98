/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The link benchmark's peer: the least a libcurl client must do for a job. LANES
 * transfers at a time on one curl multi handle (keep-alive connections from its
 * pool, TLS verified against CA), each lane looping: GET .../jobs?wait=30&max=1, then
 * POST .../jobs/{id}/result with a minimal Result. No JSON library, no journal, no
 * worker: one request pair per job. It stops after N results; fastctl (mode win)
 * times it exactly as it times the agent, so the two figures are comparable.
 *
 *   curlpairs BASE_URL NODE_ID CA_FILE N LANES
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lane {
        CURL *easy;
        struct curl_slist *headers;
        char url[512];
        char in[8192];
        size_t in_len;
        int posting; /* 0: getting a job, 1: posting its result */
};

static const char *base, *node_id;
static long want, posted;

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        struct lane *l = userdata;
        size_t len = size * n;
        if (len > sizeof(l->in) - 1 - l->in_len)
                len = sizeof(l->in) - 1 - l->in_len;
        memcpy(l->in + l->in_len, data, len);
        l->in_len += len;
        return size * n;
}

static void lane_get(CURLM *m, struct lane *l)
{
        snprintf(l->url, sizeof(l->url), "%s/nodes/%s/jobs?wait=30&max=1", base, node_id);
        curl_easy_setopt(l->easy, CURLOPT_URL, l->url);
        curl_easy_setopt(l->easy, CURLOPT_HTTPGET, 1L);
        l->posting = 0;
        l->in_len = 0;
        curl_multi_add_handle(m, l->easy);
}

static void lane_post(CURLM *m, struct lane *l, const char *id)
{
        static const char result[] = "{\"attempt\":1,\"status\":\"succeeded\",\"data\":{},"
                                     "\"finishedAt\":\"2026-11-21T10:00:03Z\",\"durationMs\":0}";
        snprintf(l->url, sizeof(l->url), "%s/jobs/%.36s/result", base, id);
        curl_easy_setopt(l->easy, CURLOPT_URL, l->url);
        curl_easy_setopt(l->easy, CURLOPT_POSTFIELDS, result);
        curl_easy_setopt(l->easy, CURLOPT_POSTFIELDSIZE, (long)sizeof(result) - 1);
        l->posting = 1;
        l->in_len = 0;
        curl_multi_add_handle(m, l->easy);
}

int main(int argc, char **argv)
{
        if (argc != 6) {
                fprintf(stderr, "usage: curlpairs BASE_URL NODE_ID CA_FILE N LANES\n");
                return 2;
        }
        base = argv[1];
        node_id = argv[2];
        want = atol(argv[4]);
        int nlanes = atoi(argv[5]);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        CURLM *m = curl_multi_init();
        struct lane *lanes = calloc((size_t)nlanes, sizeof(*lanes));
        char auth[128], node[128];
        snprintf(auth, sizeof(auth), "Authorization: Bearer bench");
        snprintf(node, sizeof(node), "X-Node-Id: %s", node_id);
        for (int i = 0; i < nlanes; i++) {
                struct lane *l = &lanes[i];
                l->easy = curl_easy_init();
                l->headers = curl_slist_append(l->headers, auth);
                l->headers = curl_slist_append(l->headers, node);
                l->headers = curl_slist_append(l->headers, "Content-Type: application/json");
                l->headers = curl_slist_append(l->headers, "Expect:");
                curl_easy_setopt(l->easy, CURLOPT_HTTPHEADER, l->headers);
                curl_easy_setopt(l->easy, CURLOPT_CAINFO, argv[3]);
                curl_easy_setopt(l->easy, CURLOPT_WRITEFUNCTION, on_body);
                curl_easy_setopt(l->easy, CURLOPT_WRITEDATA, l);
                curl_easy_setopt(l->easy, CURLOPT_PRIVATE, l);
                curl_easy_setopt(l->easy, CURLOPT_NOSIGNAL, 1L);
                lane_get(m, l);
        }
        int running = 1;
        while (posted < want) {
                curl_multi_perform(m, &running);
                CURLMsg *msg;
                int left;
                while ((msg = curl_multi_info_read(m, &left))) {
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        struct lane *l;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&l);
                        CURLcode rc = msg->data.result;
                        curl_multi_remove_handle(m, l->easy);
                        if (rc != CURLE_OK) {
                                fprintf(stderr, "curlpairs: %s\n", curl_easy_strerror(rc));
                                return 1;
                        }
                        l->in[l->in_len] = '\0';
                        const char *id = l->posting ? NULL : strstr(l->in, "\"id\":\"");
                        if (l->posting)
                                posted++;
                        if (id && strlen(id + 6) >= 36)
                                lane_post(m, l, id + 6);
                        else if (posted < want)
                                lane_get(m, l);
                }
                if (posted < want)
                        curl_multi_poll(m, NULL, 0, 1000, NULL);
        }
        for (int i = 0; i < nlanes; i++) {
                curl_multi_remove_handle(m, lanes[i].easy);
                curl_easy_cleanup(lanes[i].easy);
                curl_slist_free_all(lanes[i].headers);
        }
        free(lanes);
        curl_multi_cleanup(m);
        curl_global_cleanup();
        return 0;
}
