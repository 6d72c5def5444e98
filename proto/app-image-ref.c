/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Image references of apps: "<name>:<tag>" and "<name>@sha256:<hex>". */
#include "proto/app-image-ref.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

static bool tag_char(char c, bool first)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
                return true;
        return !first && (c == '.' || c == '-');
}

static const char *check_name(const char *s, size_t n)
{
        if (n == 0)
                return "the image name is empty";
        if (n > PROTO_IMAGE_NAME_MAX)
                return "the image name is longer than 255 characters";
        size_t comp = 0;
        for (size_t i = 0; i <= n; i++) {
                if (i == n || s[i] == '/') {
                        if (comp == 0)
                                return "the image name has an empty component (a leading, trailing or double '/')";
                        if ((comp == 1 && s[i - 1] == '.') || (comp == 2 && s[i - 1] == '.' && s[i - 2] == '.'))
                                return "the image name has a '.' or '..' component";
                        comp = 0;
                        continue;
                }
                if (!name_char(s[i]))
                        return "the image name allows lowercase letters, digits, '.', '_', '-' and '/' between "
                               "components";
                comp++;
        }
        return NULL;
}

int proto_image_ref_parse(const char *s, const char *field, struct proto_image_ref *ret, struct na_error *err)
{
        memset(ret, 0, sizeof(*ret));
        if (!s || !*s)
                return na_error_field(err, field, "an image reference is required (<name>:<tag> or <name>@sha256:<hex>)");
        const char *why = NULL;
        const char *at = strchr(s, '@');
        const char *colon = strrchr(s, ':');
        size_t name_len;
        if (at) {
                name_len = (size_t)(at - s);
                const char *d = at + 1;
                if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != PROTO_IMAGE_DIGEST_LEN)
                        why = "the digest must be sha256: and 64 lower-case hex digits";
                for (size_t i = 7; !why && d[i]; i++)
                        if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
                                why = "the digest must be sha256: and 64 lower-case hex digits";
                if (!why)
                        memcpy(ret->digest, d, PROTO_IMAGE_DIGEST_LEN + 1);
        } else if (colon && !strchr(colon, '/')) {
                name_len = (size_t)(colon - s);
                const char *t = colon + 1;
                size_t tl = strlen(t);
                if (tl == 0 || tl > PROTO_IMAGE_TAG_MAX)
                        why = "the tag must be 1..128 characters";
                for (size_t i = 0; !why && i < tl; i++)
                        if (!tag_char(t[i], i == 0))
                                why = "the tag allows letters, digits, '_', and '.' or '-' after the first character";
                if (!why)
                        memcpy(ret->tag, t, tl + 1);
        } else
                return na_error_field(err, field, "the image reference needs a tag (<name>:<tag>) or a digest "
                                                  "(<name>@sha256:<hex>)");
        if (!why)
                why = check_name(s, name_len);
        if (why) {
                memset(ret, 0, sizeof(*ret));
                return na_error_field(err, field, "%s", why);
        }
        memcpy(ret->name, s, name_len);
        ret->name[name_len] = '\0';
        return 0;
}

const char *proto_image_ref_format(const struct proto_image_ref *ref, char *buf, size_t len)
{
        if (ref->digest[0])
                snprintf(buf, len, "%s@%s", ref->name, ref->digest);
        else
                snprintf(buf, len, "%s:%s", ref->name, ref->tag);
        return buf;
}
