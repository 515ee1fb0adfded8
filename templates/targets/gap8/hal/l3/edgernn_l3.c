/* The AI-deck's stream memory (edgernn_l3_stream.h's board side): the weights that do not fit L2 are the file
 * edgernn_l3.bin of the flash image's readfs partition (the SDK's gapy writes it: READFS_FILES in the
 * Makefile), so they survive a power cycle. At init the fabric controller copies that file from the
 * HyperFlash (cs 1) into the HyperRAM (cs 0), once; each step the cluster's master core reads its chunks
 * from the HyperRAM into L2 with pi_cl_ram_read, which the fabric controller serves by uDMA while the
 * cluster computes. Why HyperRAM and not the HyperFlash directly: docs/boards/ai_deck.md, "Models beyond L2". */
#include "pmsis.h"
#include "bsp/bsp.h"
#include "bsp/flash/hyperflash.h"
#include "bsp/ram.h"
#include "bsp/ram/hyperram.h"

#include "edgernn_l3_stream.h"
#include "hal.h"
#include "init_failed.h"

#ifndef EDGERNN_L3_BENCH
#define EDGERNN_L3_BENCH 0
#endif

#define L3_FILE "edgernn_l3.bin"
#define L3_COPY_BYTES 4096u       /* the boot copy's L2 bounce buffer */

static struct pi_device l3_ram;
static uint32_t l3_base;
static int l3_opened;
static pi_cl_ram_req_t l3_req[2][2];
static uint8_t l3_busy[2][2];

/* The file is found by reading gapy's layout with pi_flash_read: the image's word 0 is its partition table's
 * offset in the image (gen_flash_image.py); the table is a 32-byte header (magic 0x02ba, version, count) and
 * 32-byte entries (magic 0x01ba, type, subtype, offset, size; readfs: data 0x01 / 0x81, bsp/partition.h); the
 * readfs partition begins with its header's size (8 bytes), then the file count and each file's offset in the
 * partition, size, name length and name (gen_readfs.py). Every offset is from the image's start. Why not
 * pi_fs_mount: with the readfs of this very image it failed in GVSOC (the firmware built by Debian's gcc
 * through edgernn's wrapper), while pi_flash_read of the same bytes gave them right; the cause was not found.
 *
 * Where the image starts: JTAG (`make flash`) writes it at flash address 0, over the AI-deck's bootloader; the
 * bootloader (`cfloader ... deck-bcAI:gap8-fw`) writes the whole image at 0x40000, behind its own image,
 * whose table is at 0. The SDK's flash partition code reads the table at address 0 only, which is why a
 * readfs mount finds nothing after a radio flash (Bitcraze's docker image patches that file with an offset
 * fixed at build time). Here each base of L3_IMAGE_BASES is tried in turn, and a file is taken only with
 * the blob's size and checksum, both compiled into the model: a table at 0 that is the bootloader's, or an
 * older image left behind the new one, is passed over. */
#ifndef EDGERNN_L3_IMAGE_BASES
#define EDGERNN_L3_IMAGE_BASES 0x0u, 0x40000u
#endif
static const uint32_t l3_image_bases[] = {EDGERNN_L3_IMAGE_BASES};

#define L3_TABLE_MAGIC 0x02bau
#define L3_ENTRY_MAGIC 0x01bau
#define L3_HEADER_MAX 256u

/* The HyperFlash's size (the AI-deck's: 64 MiB). Every offset read from the flash is checked against it before
 * it is followed: at a base where no image starts (after a JTAG flash, 0x40000 holds the middle of the image)
 * the words are the image's other bytes, and an address built from them lies anywhere in 4 GiB. Silicon would
 * return some bytes for it; GVSOC's flash model crashes the simulator (SIGSEGV) before init can say why it
 * failed. pi_flash_ioctl's PI_FLASH_IOCTL_INFO leaves the size unset for the HyperFlash. */
#ifndef EDGERNN_L3_FLASH_BYTES
#define EDGERNN_L3_FLASH_BYTES 0x4000000u
#endif

/* Whether [at, at + bytes) lies in the flash, without overflow. */
static int l3_in_flash(uint32_t at, uint32_t bytes)
{
    return at <= EDGERNN_L3_FLASH_BYTES && bytes <= EDGERNN_L3_FLASH_BYTES - at;
}

static uint32_t l3_word(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The flash offset and size of the readfs file L3_FILE of the image at flash address `base`, or -1.
 * buf: L3_HEADER_MAX bytes of L2. */
static int l3_find_file(struct pi_device *flash, uint32_t base, uint8_t *buf, uint32_t *offset, uint32_t *size)
{
    uint32_t table, n, i, part = 0, found = 0, nb, at, k;
    const uint32_t name_len = (uint32_t)sizeof(L3_FILE) - 1u;
    if (!l3_in_flash(base, 8)) {
        return -1;
    }
    pi_flash_read(flash, base, buf, 8);
    if (!l3_in_flash(base, l3_word(buf)) || !l3_in_flash(base + l3_word(buf), 32)) {
        return -1;
    }
    table = base + l3_word(buf);
    pi_flash_read(flash, table, buf, 32);
    if ((l3_word(buf) & 0xffffu) != L3_TABLE_MAGIC) {
        return -1;
    }
    n = buf[3];
    if (!l3_in_flash(table, 32u * (n + 1u))) {
        return -1;
    }
    for (i = 0; i < n && !found; ++i) {
        pi_flash_read(flash, table + 32u * (i + 1u), buf, 32);
        if ((l3_word(buf) & 0xffffu) == L3_ENTRY_MAGIC && buf[2] == 0x01u && buf[3] == 0x81u) {
            part = base + l3_word(buf + 4);
            found = l3_in_flash(base, l3_word(buf + 4)) && l3_in_flash(part, L3_HEADER_MAX);
            if (!found) {
                return -1;
            }
        }
    }
    if (!found) {
        return -1;
    }
    pi_flash_read(flash, part, buf, L3_HEADER_MAX);
    nb = l3_word(buf + 8);
    at = 12;
    for (i = 0; i < nb && at + 12u <= L3_HEADER_MAX; ++i) {
        const uint32_t file_at = l3_word(buf + at), file_size = l3_word(buf + at + 4), len = l3_word(buf + at + 8);
        int same = len >= name_len && at + 12u + len <= L3_HEADER_MAX;
        for (k = 0; same && k < name_len; ++k) {
            same = buf[at + 12u + k] == (uint8_t)L3_FILE[k];
        }
        if (same && (len == name_len || buf[at + 12u + name_len] == 0)) {
            if (!l3_in_flash(part, file_at) || !l3_in_flash(part + file_at, file_size)) {
                return -1;
            }
            *offset = part + file_at;
            *size = file_size;
            return 0;
        }
        at += 12u + len;
    }
    return -1;
}

#if EDGERNN_L3_BENCH == 3
/* bench/bench_l3.py: the fabric controller's cycles to read `bytes` from the HyperFlash and from the HyperRAM,
 * in 4 KiB transfers to L2 (pi_flash_read, pi_ram_read), printed as one line; init then fails on purpose. */
static void l3_put_number(char *line, int *at, uint32_t v)
{
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0u);
    while (n > 0) {
        line[(*at)++] = digits[--n];
    }
}

static void l3_print_bandwidths(struct pi_device *flash, uint32_t offset, uint8_t *bounce, uint32_t bytes)
{
    static const char *const names[] = {"~~~EDGERNN L3 BENCH bytes=", " flash_fc_cycles=", " ram_fc_cycles=", "~~~\n"};
    uint32_t cycles[2], done;
    char line[160];
    int at = 0, k, w;
    for (k = 0; k < 2; ++k) {
        pi_perf_conf(1 << PI_PERF_CYCLES);
        pi_perf_reset();
        pi_perf_start();
        for (done = 0; done < bytes; done += L3_COPY_BYTES) {
            const uint32_t n = bytes - done < L3_COPY_BYTES ? bytes - done : L3_COPY_BYTES;
            if (k == 0) {
                pi_flash_read(flash, offset + done, bounce, n);
            } else {
                pi_ram_read(&l3_ram, l3_base + done, bounce, n);
            }
        }
        pi_perf_stop();
        cycles[k] = (uint32_t)pi_perf_read(PI_PERF_CYCLES);
    }
    for (k = 0; k < 4; ++k) {
        for (w = 0; names[k][w] != 0; ++w) {
            line[at++] = names[k][w];
        }
        if (k < 3) {
            l3_put_number(line, &at, k == 0 ? bytes : cycles[k - 1]);
        }
    }
    edgernn_hal_uart_write((const uint8_t *)line, at);
}
#endif

/* FNV-1a over 32-bit little-endian words (edgernn/backend/streaming.py: blob_checksum). */
static uint32_t l3_checksum(uint32_t h, const uint8_t *p, uint32_t n)
{
    uint32_t i;
    for (i = 0; i + 4u <= n; i += 4u) {
        h = (h ^ l3_word(p + i)) * 0x01000193u;
    }
    return h;
}

/* Copy the blob at flash `offset` into the HyperRAM at l3_base; whether its checksum is `checksum`. */
static int l3_copy(struct pi_device *flash, uint8_t *bounce, uint32_t offset, uint32_t bytes, uint32_t checksum)
{
    uint32_t done = 0, h = 0x811c9dc5u;
    while (done < bytes) {
        const uint32_t n = bytes - done < L3_COPY_BYTES ? bytes - done : L3_COPY_BYTES;
        pi_flash_read(flash, offset + done, bounce, n);
        h = l3_checksum(h, bounce, n);
        pi_ram_write(&l3_ram, l3_base + done, bounce, n);
        done += n;
    }
    return h == checksum;
}

int edgernn_l3_open(uint32_t bytes, uint32_t checksum)
{
    struct pi_device flash;
    struct pi_hyperflash_conf flash_conf;
    struct pi_hyperram_conf ram_conf;
    uint8_t *bounce;
    uint32_t offset = 0, size = 0, b;
    int status = -1, ram = 0, sized = 0;

    if (l3_opened) {
        return 0;
    }
    pi_hyperflash_conf_init(&flash_conf);
    pi_open_from_conf(&flash, &flash_conf);
    if (pi_flash_open(&flash) != 0) {
        edgernn_hal_say_init_failed("the HyperFlash did not open (L3 weights)");
        return -1;
    }
    bounce = (uint8_t *)pi_l2_malloc(L3_COPY_BYTES);
    if (bounce != NULL) {
        pi_hyperram_conf_init(&ram_conf);
        pi_open_from_conf(&l3_ram, &ram_conf);
        if (pi_ram_open(&l3_ram) == 0) {
            ram = 1;
            if (pi_ram_alloc(&l3_ram, &l3_base, bytes) != 0) {
                status = -2;
            }
        }
    }
    for (b = 0; ram && status == -1 && b < sizeof(l3_image_bases) / sizeof(l3_image_bases[0]); ++b) {
        if (l3_find_file(&flash, l3_image_bases[b], bounce, &offset, &size) == 0 && size == bytes) {
            sized = 1;
            if (l3_copy(&flash, bounce, offset, bytes, checksum)) {
                status = 0;
#if EDGERNN_L3_BENCH == 3
                l3_print_bandwidths(&flash, offset, bounce, bytes);
                status = -5;
#endif
            }
        }
    }
    if (bounce == NULL) {
        edgernn_hal_say_init_failed("no L2 for the L3 weights' copy buffer");
    } else if (!ram) {
        edgernn_hal_say_init_failed("the HyperRAM did not open (L3 weights)");
    } else if (status == -2) {
        edgernn_hal_say_init_failed("no room in the HyperRAM for the L3 weights");
    } else if (status == -1) {
        edgernn_hal_say_init_failed(sized ? "stale L3 weights: the flash's " L3_FILE " does not match this firmware's checksum "
                           "(flash the image again)"
                         : "no L3 weights: no " L3_FILE " of this firmware's size in the flash image's readfs "
                           "(flash the image again)");
    }
    if (ram && status != 0) {
        if (status != -2) {
            pi_ram_free(&l3_ram, l3_base, bytes);
        }
        pi_ram_close(&l3_ram);
    }
    if (bounce != NULL) {
        pi_l2_free(bounce, L3_COPY_BYTES);
    }
    pi_flash_close(&flash);
    l3_opened = status == 0;
    return status;
}

void edgernn_l3_read(int slot, int part, void *dst, uint32_t offset, uint32_t bytes)
{
    pi_cl_ram_read(&l3_ram, l3_base + offset, dst, bytes, &l3_req[slot][part]);
    l3_busy[slot][part] = 1;
}

void edgernn_l3_wait(int slot)
{
    int part;
    for (part = 0; part < 2; ++part) {
        if (l3_busy[slot][part]) {
            pi_cl_ram_read_wait(&l3_req[slot][part]);
            l3_busy[slot][part] = 0;
        }
    }
}
