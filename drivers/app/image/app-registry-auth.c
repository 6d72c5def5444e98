/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The registry's GET with its 401 answered: a bearer token from the realm, or basic credentials. */
#include "drivers/app/image/app-registry-internal.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <strings.h>

#include "common/fileio.h"
#include "common/json-cleanup.h"

#define REG_TOKEN_MAX 16384
#define REG_TOKEN_BODY_MAX (1024 * 1024)

static bool credential_ok(const char *s, bool is_user)
{
        if (strlen(s) > 1024)
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f || (is_user && *p == ':'))
                        return false;
        return true;
}

int reg_client_init(struct reg_client *c, const struct app_registry_options *o, const struct proto_image_ref *ref,
                    struct na_error *err)
{
        memset(c, 0, sizeof(*c));
        c->opt = o;
        proto_image_ref_format(ref, c->image, sizeof(c->image));
        snprintf(c->what, sizeof(c->what), "registry %.300s: image %s", o && o->url ? o->url : "(none)", c->image);

        if (!o || !o->url || !o->url[0])
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "%s: no registry configured ([apps] registry)", c->what);
        size_t n = strlen(o->url);
        while (n > 0 && o->url[n - 1] == '/')
                n--;
        if (n == 0 || n >= 1024)
                return na_error_set(err, EINVAL, NA_E_VALIDATION, "%s: the registry URL is not usable", c->what);
        memcpy(c->base, o->url, n);
        c->base[n] = 0;
        bool loopback = false, https = false;
        if (reg_url_origin(c->base, c->origin, sizeof(c->origin), &loopback, &https) < 0 ||
            strchr(c->base, '?') || strchr(c->base, '#') || strchr(c->base, '@'))
                return na_error_set(err, EINVAL, NA_E_VALIDATION,
                                    "%s: the registry URL must be scheme://host[:port][/prefix]", c->what);
        if (!https && !(strncmp(c->origin, "http://", 7) == 0 && loopback && o->allow_insecure_http))
                return na_error_set(err, EINVAL, NA_E_VALIDATION,
                                    "%s: the registry URL must be https (plain http only to a loopback host when allowed)",
                                    c->what);
        if ((o->username && !credential_ok(o->username, true)) || (o->password && !credential_ok(o->password, false)) ||
            (!o->username != !o->password))
                return na_error_set(err, EINVAL, NA_E_VALIDATION,
                                    "%s: registry credentials need a username (no ':') and a password", c->what);
        c->easy = curl_easy_init();
        if (!c->easy)
                return na_error_set(err, ENOMEM, NA_E_INTERNAL, "%s: cannot start libcurl", c->what);
        return 0;
}

void reg_client_done(struct reg_client *c)
{
        if (c->easy)
                curl_easy_cleanup(c->easy);
        c->easy = NULL;
        if (c->auth)
                explicit_bzero(c->auth, strlen(c->auth));
        free(c->auth);
        c->auth = NULL;
}

/* "Authorization: Basic <base64(user:password)>", or NULL without credentials. */
static char *basic_header(const struct reg_client *c)
{
        if (!c->opt->username)
                return NULL;
        _cleanup_free_ char *plain = na_strdupf("%s:%s", c->opt->username, c->opt->password);
        if (!plain)
                return NULL;
        size_t n = strlen(plain);
        char *h = malloc(strlen("Authorization: Basic ") + 4 * ((n + 2) / 3) + 1);
        if (h) {
                strcpy(h, "Authorization: Basic ");
                EVP_EncodeBlock((unsigned char *)h + strlen(h), (const unsigned char *)plain, (int)n);
        }
        explicit_bzero(plain, n);
        return h;
}

/* Skip blanks and the commas between parameters and challenges. */
static const char *skip_sep(const char *s)
{
        while (*s == ',' || isspace((unsigned char)*s))
                s++;
        return s;
}

const char *reg_challenge_parse(const char *s, struct reg_challenge *ch)
{
        memset(ch, 0, sizeof(*ch));
        s = skip_sep(s);
        if (!*s)
                return NULL;
        size_t i = 0;
        while (*s && *s != ',' && !isspace((unsigned char)*s)) {
                if (i + 1 < sizeof(ch->scheme))
                        ch->scheme[i++] = *s;
                s++;
        }
        for (;;) {
                s = skip_sep(s);
                const char *key_start = s;
                char key[32];
                size_t k = 0;
                while (*s && *s != '=' && *s != ',' && !isspace((unsigned char)*s)) {
                        if (k + 1 < sizeof(key))
                                key[k++] = (char)tolower((unsigned char)*s);
                        s++;
                }
                key[k] = 0;
                while (isspace((unsigned char)*s))
                        s++;
                if (k == 0 && *s != '=')
                        return *s ? s : NULL;
                if (*s != '=')
                        return key_start; /* a word without '=': the next challenge's scheme */
                s++;
                while (isspace((unsigned char)*s))
                        s++;
                char *dst = streq(key, "realm") ? ch->realm : streq(key, "service") ? ch->service
                                                              : streq(key, "scope") ? ch->scope : NULL;
                size_t cap = dst == ch->realm ? sizeof(ch->realm) : dst == ch->service ? sizeof(ch->service)
                                                                                          : sizeof(ch->scope);
                size_t j = 0;
                if (*s == '"') {
                        s++;
                        while (*s && *s != '"') {
                                if (*s == '\\' && s[1])
                                        s++;
                                if (dst && j + 1 < cap)
                                        dst[j++] = *s;
                                s++;
                        }
                        if (*s == '"')
                                s++;
                } else
                        while (*s && *s != ',' && !isspace((unsigned char)*s)) {
                                if (dst && j + 1 < cap)
                                        dst[j++] = *s;
                                s++;
                        }
                if (dst)
                        dst[j] = 0;
        }
}

static bool token_ok(const char *t)
{
        size_t n = strlen(t);
        if (n == 0 || n > REG_TOKEN_MAX)
                return false;
        for (; *t; t++)
                if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
                        return false;
        return true;
}

static int fetch_token(struct reg_client *c, const struct reg_challenge *ch, struct na_error *err)
{
        char scope[1200];
        if (ch->scope[0])
                snprintf(scope, sizeof(scope), "%s", ch->scope);
        else {
                char name[PROTO_IMAGE_NAME_MAX + 1];
                snprintf(name, sizeof(name), "%s", c->image);
                name[strcspn(name, ":@")] = 0;
                snprintf(scope, sizeof(scope), "repository:%s:pull", name);
        }
        char *esc_service = curl_easy_escape(c->easy, ch->service, 0);
        char *esc_scope = curl_easy_escape(c->easy, scope, 0);
        _cleanup_free_ char *url = NULL;
        if (esc_service && esc_scope)
                url = na_strdupf("%s%sservice=%s&scope=%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?", esc_service,
                                 esc_scope);
        curl_free(esc_service);
        curl_free(esc_scope);
        if (!url)
                return na_error_sys(err, ENOMEM, "%s: token request", c->what);
        int r = reg_url_check(c, ch->realm, "token realm", err);
        if (r < 0)
                return r;
        char realm_origin[REG_URL_MAX];
        if (reg_url_origin(ch->realm, realm_origin, sizeof(realm_origin), NULL, NULL) < 0)
                return reg_fail(c, "unauthorized", err, "token realm is not a URL: %.200s", ch->realm);

        _cleanup_free_ char *basic = basic_header(c);
        if (c->opt->username && !basic)
                return na_error_sys(err, ENOMEM, "%s: credentials", c->what);
        static const char *const accept[] = {"Accept: application/json", NULL};
        struct reg_get_args a = {.url = url, .headers = accept, .auth = basic, .auth_origin = realm_origin,
                                 .max_body = REG_TOKEN_BODY_MAX, .timeout_sec = 60};
        struct reg_response resp = {0};
        CURLcode code;
        r = reg_get(c, &a, &resp, &code, err);
        if (basic)
                explicit_bzero(basic, strlen(basic));
        if (r < 0) {
                reg_response_done(&resp);
                return na_error_prefix(err, "token");
        }
        if (resp.status != 200) {
                long st = resp.status;
                reg_response_done(&resp);
                return reg_fail(c, "unauthorized", err, "the token service %.200s refused %s (HTTP %ld)", ch->realm,
                                c->opt->username ? "the credentials" : "an anonymous pull", st);
        }
        _cleanup_json_ json_t *j = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        reg_response_done(&resp);
        const char *tok = json_string_value(json_object_get(j, "token"));
        if (!tok)
                tok = json_string_value(json_object_get(j, "access_token"));
        if (!tok || !token_ok(tok))
                return reg_fail(c, "unauthorized", err, "the token service %.200s answered no usable token", ch->realm);
        free(c->auth);
        c->auth = na_strdupf("Authorization: Bearer %s", tok);
        if (!c->auth)
                return na_error_sys(err, ENOMEM, "%s: token", c->what);
        return 0;
}

/* Answer the challenges of a 401: the first Bearer one, else Basic. */
static int authenticate(struct reg_client *c, const struct reg_response *resp, struct na_error *err)
{
        struct reg_challenge ch;
        bool basic = false;
        for (size_t i = 0; i < resp->n_challenges; i++)
                for (const char *p = resp->challenges[i]; p && *p;) {
                        p = reg_challenge_parse(p, &ch);
                        if (strcasecmp(ch.scheme, "bearer") == 0 && ch.realm[0])
                                return fetch_token(c, &ch, err);
                        if (strcasecmp(ch.scheme, "basic") == 0)
                                basic = true;
                }
        if (!basic)
                return reg_fail(c, "unauthorized", err,
                                "the registry refused an anonymous pull and asks for no known kind of credentials");
        if (!c->opt->username)
                return reg_fail(c, "unauthorized", err, "the registry asks for credentials and none are configured");
        free(c->auth);
        c->auth = basic_header(c);
        if (!c->auth)
                return na_error_sys(err, ENOMEM, "%s: credentials", c->what);
        return 0;
}

int reg_registry_get(struct reg_client *c, struct reg_get_args *a, struct reg_response *resp, CURLcode *ret_code,
                     struct na_error *err)
{
        for (int attempt = 0;; attempt++) {
                a->auth = c->auth;
                a->auth_origin = c->origin;
                int r = reg_get(c, a, resp, ret_code, err);
                if (r < 0 || resp->status != 401 || attempt > 0)
                        return r;
                r = authenticate(c, resp, err);
                if (r < 0)
                        return r;
        }
}

int reg_response_error(const struct reg_client *c, const struct reg_response *resp, const char *what,
                       struct na_error *err)
{
        /* The distribution API's error body: {"errors": [{"code": "MANIFEST_UNKNOWN", ...}]} */
        _cleanup_json_ json_t *j = resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        json_t *first = json_array_get(json_object_get(j, "errors"), 0);
        const char *code = json_string_value(json_object_get(first, "code"));
        const char *msg = json_string_value(json_object_get(first, "message"));
        if (resp->status == 404 || (code && (streq(code, "MANIFEST_UNKNOWN") || streq(code, "NAME_UNKNOWN")))) {
                int r = na_error_set(err, ENOENT, NA_E_IMAGE_NOT_FOUND, "%s: %s: not in the registry (HTTP %ld%s%s)",
                                     c->what, what, resp->status, code ? ", " : "", code ? code : "");
                na_error_detail(err, "image", json_string(c->image));
                na_error_detail(err, "registry", json_string(c->opt->url));
                return r;
        }
        if (resp->status == 401 || resp->status == 403)
                return reg_fail(c, "unauthorized", err, "%s: the registry refused the %s (HTTP %ld%s%.100s)", what,
                                c->opt->username ? "credentials" : "anonymous pull", resp->status, msg ? ": " : "",
                                msg ? msg : "");
        return reg_fail(c, "http-status", err, "%s: HTTP %ld%s%.100s%s%.200s", what, resp->status, code ? " " : "",
                        code ? code : "", msg ? ": " : "", msg ? msg : "");
}
