/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Checks of container ids and paths (see app-names.h). */
#include "drivers/app/oci/app-names.h"

#include <ctype.h>
#include <string.h>

bool app_name_valid(const char *s)
{
        if (!s || !*s || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t n = 0; s[n]; n++)
                if (n >= 64 || !(isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == '.' || s[n] == '-'))
                        return false;
        return true;
}

bool app_path_clean(const char *p)
{
        if (!p || p[0] != '/' || strlen(p) >= 4000)
                return false;
        if (p[1] == '\0')
                return true;
        for (const char *s = p; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        const char *c = p;
        while (*c) {
                c++; /* past the '/' */
                const char *e = strchrnul(c, '/');
                size_t n = (size_t)(e - c);
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c = e;
        }
        return true;
}
