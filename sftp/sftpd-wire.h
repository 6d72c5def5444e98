/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The SFTP v3 wire format of nodeagent-sftpd (sftpd-sftp.c): packet types, status
 * codes and flags, a bounds-checked reader of one request (rd_*: a short or malformed
 * field sets bad and reads as zero) and a growing buffer of replies (put_*, begin/end
 * around one packet). No I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
        FXP_INIT = 1, FXP_VERSION = 2, FXP_OPEN = 3, FXP_CLOSE = 4, FXP_READ = 5, FXP_WRITE = 6, FXP_LSTAT = 7,
        FXP_FSTAT = 8, FXP_SETSTAT = 9, FXP_FSETSTAT = 10, FXP_OPENDIR = 11, FXP_READDIR = 12, FXP_REMOVE = 13,
        FXP_MKDIR = 14, FXP_RMDIR = 15, FXP_REALPATH = 16, FXP_STAT = 17, FXP_RENAME = 18, FXP_READLINK = 19,
        FXP_SYMLINK = 20, FXP_STATUS = 101, FXP_HANDLE = 102, FXP_DATA = 103, FXP_NAME = 104, FXP_ATTRS = 105,
        FXP_EXTENDED = 200,
};
enum { FX_OK, FX_EOF, FX_NO_SUCH_FILE, FX_PERMISSION_DENIED, FX_FAILURE, FX_BAD_MESSAGE, FX_NO_CONNECTION,
       FX_CONNECTION_LOST, FX_OP_UNSUPPORTED };
enum { ATTR_SIZE = 1, ATTR_UIDGID = 2, ATTR_PERMISSIONS = 4, ATTR_ACMODTIME = 8, ATTR_EXTENDED = 0x80000000u };
enum { PF_READ = 1, PF_WRITE = 2, PF_APPEND = 4, PF_CREAT = 8, PF_TRUNC = 0x10, PF_EXCL = 0x20 };

#define PACKET_MAX (256u * 1024 + 1024)
#define READ_MAX (256u * 1024)
#define HANDLES 256
#define READDIR_BATCH 100

struct buf {
        unsigned char *p;
        size_t len, cap;
};

struct rd {
        const unsigned char *p;
        size_t left;
        bool bad;
};

struct attrs {
        uint32_t flags;
        uint64_t size;
        uint32_t perm, atime, mtime;
};

uint32_t rd_u32(struct rd *r);
uint64_t rd_u64(struct rd *r);
/* A string: a pointer into the request and its length (NULL, 0 and bad when short). */
const unsigned char *rd_str(struct rd *r, uint32_t *len);
/* A path string, made canonical (sftp/sftp-path.h); false when malformed or too long. */
bool rd_path(struct rd *r, char *out, size_t out_size);
void rd_attrs(struct rd *r, struct attrs *a);

/* Room for more bytes; false when out of memory (then put_* add nothing). */
bool buf_grow(struct buf *b, size_t more);
void put_u32(struct buf *b, uint32_t v);
void put_u64(struct buf *b, uint64_t v);
void put_str(struct buf *b, const void *s, size_t n);
void put_cstr(struct buf *b, const char *s);
/* Start a packet of type (with a request id): its length is filled by pkt_end(at). */
size_t pkt_begin(struct buf *b, unsigned char type, uint32_t id);
void pkt_end(struct buf *b, size_t at);
