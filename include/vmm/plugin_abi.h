/* The transport plugin ABI, version 1: how a shared object adds a migration transport for a
 * URI scheme (e.g. rdma:) without our C++ headers.
 *
 * A plugin is a shared object named vmm-transport-SCHEME.so that exports
 *     const struct vmm_transport_ops *vmm_transport_plugin_v1(void);
 * vmm looks for it in $VMM_PLUGIN_DIR, then <dir of vmm>/../lib/vmm, then <dir of vmm>/../lib,
 * and loads it with dlopen(RTLD_NOW | RTLD_LOCAL).
 *
 * Rules:
 * - Functions returning int return 0 on success and -1 on failure, after writing one line
 *   (what failed, why, what to do) into err->text. Pointer-returning ones return NULL on failure.
 * - No C++ exception, signal or longjmp crosses this boundary.
 * - `args` and everything it points to is valid only during the call: copy what you keep. RAM
 *   block host pointers stay valid for the life of the connection.
 * - Every blocking call must return promptly (with an error) once args->cancel_fd becomes
 *   readable, and must fail after args->io_timeout_ms of silence from the peer.
 * - A connection is used by one thread at a time, except in postcopy (pc_* below), where each
 *   call names the thread that makes it and two may run at once.
 * - Members appended later are optional: vmm reads one only when ops->struct_size covers it,
 *   so a plugin built against an older header keeps loading.
 */
#ifndef VMM_PLUGIN_ABI_H
#define VMM_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VMM_TRANSPORT_ABI_VERSION 1u
#define VMM_TRANSPORT_ENTRY "vmm_transport_plugin_v1"

struct vmm_err {
    char text[512];
};

struct vmm_ram_block {
    const char *name;
    void *host;
    uint64_t size;
    uint64_t guest_addr;
};

struct vmm_kv {
    const char *name;
    const char *value; /* parameters as typed; capabilities "on" or "off" */
};

struct vmm_transport_args {
    uint32_t struct_size;
    const char *uri; /* as typed, e.g. "rdma:192.168.1.2:4444" */
    const char *host; /* tcp-style URIs: host without brackets, and port */
    uint16_t port;
    const char *rest; /* everything after "scheme:" */
    const struct vmm_ram_block *blocks;
    uint32_t block_count;
    const struct vmm_kv *params;
    uint32_t param_count;
    const struct vmm_kv *caps;
    uint32_t cap_count;
    int cancel_fd;
    uint64_t connect_timeout_ms;
    uint64_t io_timeout_ms;
    uint64_t max_bandwidth; /* bytes/s, 0 = unlimited (vmm paces; for information) */
    /* Appended (read it only when struct_size covers it): VMM_ARGS_* bits. */
    uint32_t flags;
    /* Appended (read them only when struct_size covers them), for a transport whose table says
     * VMM_TRANSPORT_TLS: tls-creds, tls-hostname and tls-authz as set ("" when unset, never
     * NULL) and x-tls-rekey-records. vmm refuses tls-creds over a transport that does not say it. */
    const char *tls_creds;
    const char *tls_hostname;
    const char *tls_authz;
    uint64_t tls_rekey_records;
    /* Appended (write it only when struct_size covers it and it is not NULL): where a failed
     * connect puts an errno when one says what happened, ECONNREFUSED above all (the address
     * answered that nothing listens there: a precopy's resumption then gives up at once). */
    int32_t *connect_errno;
    /* Appended (read it only when struct_size covers it): max-postcopy-bandwidth, bytes/s, 0 =
     * unlimited, as set when the migration connected. vmm paces the pages it hands pc_send; a
     * transport whose destination fetches pages itself (VMM_RAM_PC_PULLS) paces those with it. */
    uint64_t max_postcopy_bandwidth;
};

#define VMM_ARGS_POSTCOPY 1u /* postcopy-ram is on at this side: offer (source) / grant (destination) pc_* */
#define VMM_ARGS_VERIFY 2u   /* verify-ram is on at this side: every postcopy page must come with its sum */

/* Postcopy (pc_*): pages after the switch, as the transport carries them. */
#define VMM_PC_DATA 1u
#define VMM_PC_ZERO 2u
#define VMM_PC_END 3u /* destination's arrivals only: every page has been sent */
#define VMM_PC_MAX_PAGES 16u
#define VMM_PC_PUSH 0xffffffffu /* pc_send's token: not an answer to a request */

struct vmm_pc_pages {
    uint32_t kind;        /* VMM_PC_* */
    uint32_t block;
    uint64_t offset;      /* in the block, page-aligned */
    uint32_t pages;       /* 4 KiB pages, 1..VMM_PC_MAX_PAGES */
    uint32_t token;       /* source: the request answered, or VMM_PC_PUSH; destination: the plugin's */
    const void *data;     /* destination, VMM_PC_DATA: the pages, valid until pc_release */
    const uint64_t *sums; /* verify-ram's XXH3-64 sums, one per page, or NULL */
};

#define VMM_PC_HELD 0xfffffffeu /* pc_next_request's token: not a request; the destination holds
                                  `pages` pages from `offset` (it read them itself): send none of them */

struct vmm_pc_request {
    uint32_t done;   /* 1: the destination has every page (no request) */
    uint32_t block;
    uint64_t offset; /* in the block: one page (a request), or the first of `pages` (VMM_PC_HELD) */
    uint32_t token;  /* give it back to pc_send with the answer; or VMM_PC_HELD */
    uint32_t pages;  /* VMM_PC_HELD's count (was reserved, 0: older plugins never send it) */
};

/* A client of a pull server (serve_clients). */
#define VMM_PULL_CONNECTED 1u /* pulling */
#define VMM_PULL_DONE 2u      /* said it has what it wanted, and left */
#define VMM_PULL_GONE 3u      /* left without saying so, or was sent away (`why`) */
struct vmm_pull_client {
    char peer[64];   /* its address, e.g. "10.0.0.2:41234" */
    uint64_t pulled; /* bytes it says it has read */
    uint64_t ms;     /* since it connected (until it left) */
    uint32_t state;  /* VMM_PULL_* */
    char why[160];   /* VMM_PULL_GONE: why, when the server knows */
};

struct vmm_buf {
    const void *data;
    size_t len;
};

struct vmm_time_part {
    const char *name; /* e.g. "route": valid while the plugin is loaded */
    uint64_t us;      /* microseconds */
};

/* A setting the transport reads: a row of vmm's one settings table (appended to ABI 1; see
 * vmm_transport_ops.settings). vmm lists it beside its own (info migrate_capabilities,
 * info migrate_parameters, info migrate_settings with its help), checks every value a user sets
 * against it, and passes the rows a user set to connect and listen (vmm_transport_args caps and
 * params): capabilities as "on"/"off", integers and sizes in decimal ("2097152"), text as typed.
 * A row not passed was never set: the plugin uses its fallback (and may tell the two apart). */
struct vmm_setting {
    const char *name;    /* "x-rdma-chunk-size"; the scheme, a dash, then any name */
    const char *help;    /* one line: what it does, its unit, its default */
    uint32_t kind;       /* VMM_SETTING_* */
    uint32_t flags;      /* VMM_SETTING_F_* */
    uint64_t min, max;   /* integers and sizes: the bounds, both included */
    uint64_t fallback;   /* integers and sizes: the value when unset; capabilities: 0 or 1 */
};

#define VMM_SETTING_CAPABILITY 1u
#define VMM_SETTING_INTEGER 2u
#define VMM_SETTING_SIZE 3u /* an integer a user may type with k/m/g */
#define VMM_SETTING_TEXT 4u

#define VMM_SETTING_F_POWER_OF_TWO 1u /* integers and sizes: only powers of two */

/* At most this many rows are read from a plugin's settings. */
#define VMM_MAX_SETTINGS 64u

struct vmm_transport_ops {
    uint32_t abi_version; /* VMM_TRANSPORT_ABI_VERSION */
    uint32_t struct_size; /* sizeof(struct vmm_transport_ops) */
    const char *scheme;
    const char *const *capabilities; /* NULL-terminated names this transport reads */
    const char *const *parameters;

    void *(*connect)(const struct vmm_transport_args *args, struct vmm_err *err);
    void *(*listen)(const struct vmm_transport_args *args, struct vmm_err *err);
    void *(*accept)(void *listener, struct vmm_err *err);
    void (*close_listener)(void *listener);

    /* The byte stream. */
    int (*write)(void *conn, const struct vmm_buf *bufs, uint32_t count, struct vmm_err *err);
    int (*flush)(void *conn, struct vmm_err *err);
    int (*read)(void *conn, void *buf, size_t len, struct vmm_err *err); /* exactly len bytes */

    /* The RAM channel; all NULL when the transport carries RAM in the byte stream. */
    int (*ram_begin_round)(void *conn, uint32_t round, struct vmm_err *err);
    int (*ram_send)(void *conn, uint32_t block, uint64_t offset, uint64_t length, struct vmm_err *err);
    int (*ram_send_zero)(void *conn, uint32_t block, uint64_t offset, uint64_t length, struct vmm_err *err);
    int (*ram_end_round)(void *conn, struct vmm_err *err);
    int (*ram_serve_round)(void *conn, uint32_t round, struct vmm_err *err);

    const char *(*describe)(void *conn);
    void (*close)(void *conn);

    /* Optional, appended to ABI 1 (present when struct_size covers it; may be NULL): bytes
     * accepted by ram_send that are not yet known to be in the destination's memory. vmm reads
     * it after each ram_send so that `transferred` counts what has arrived; ram_end_round
     * leaves none. Must not block. */
    uint64_t (*ram_in_flight)(void *conn);
    /* Optional, appended to ABI 1 (as above): vmm registers `fn(ctx)` (NULL to unregister),
     * which the plugin calls on the calling thread, from inside any call on this connection
     * (ram_send, ram_end_round, the stream's), whenever more of what ram_in_flight counted has
     * arrived; vmm then reads ram_in_flight again and publishes its progress. Lets `info
     * migrate` follow the wire while the plugin waits on it. */
    void (*ram_on_arrival)(void *conn, void (*fn)(void *ctx), void *ctx);
    /* Optional, appended to ABI 1 (as above): the migration failed above the transport (e.g.
     * the destination cannot load what the source sent): tell the peer, with `reason` where the
     * protocol can carry it, best effort, without blocking for long. vmm calls close next. */
    void (*abort)(void *conn, const char *reason);
    /* Optional, appended to ABI 1 (as above): on the source, once, after the destination has
     * accepted the stream's header and before the first ram_begin_round; the destination is
     * reading the stream meanwhile. For setup work that belongs to neither the stream nor a
     * round (the RDMA plugin exchanges RAM block descriptions and pins here). */
    int (*ram_setup)(void *conn, struct vmm_err *err);
    /* Optional, appended to ABI 1 (as above): what this connection's RAM channel can do beyond
     * the required calls, as agreed with its peer (VMM_RAM_* bits). Must not block. */
    uint32_t (*ram_features)(void *conn);
    /* Optional (VMM_RAM_SUMS), source, under verify-ram: the XXH3-64 sums of the `count` pages
     * from `offset` in `block`, as vmm read them, for the range the *next* ram_send or
     * ram_send_zero hands over (the same block, offset and count * 4096 bytes). The plugin
     * delivers them to the destination's ram_on_sums callback once it knows those pages are in
     * the destination's memory, and every one of a round's before ram_end_round returns. */
    int (*ram_sums)(void *conn, uint32_t block, uint64_t offset, const uint64_t *sums, uint32_t count,
                    struct vmm_err *err);
    /* Optional (VMM_RAM_SUMS), destination: vmm registers `fn` (NULL to unregister), which the
     * plugin calls from inside ram_serve_round with sums whose pages are in this side's memory
     * (block and range checked against the blocks); `sums` is valid only during the call. A
     * nonzero return fails the round, with the text fn wrote into err. */
    void (*ram_on_sums)(void *conn,
                        int (*fn)(void *ctx, uint32_t block, uint64_t offset, const uint64_t *sums, uint32_t count,
                                  struct vmm_err *err),
                        void *ctx);

    /* Optional, appended to ABI 1, present together when ram_features says VMM_RAM_POSTCOPY:
     * postcopy over the transport. After the switch vmm moves pages through these instead of
     * the byte stream. Destination: pc_begin before its guest runs; the fault thread calls
     * pc_request; the receiving thread loops pc_next_arrival, places the pages, pc_release, and
     * after VMM_PC_END, pc_done. Source: pc_begin once the destination runs the guest; its
     * return-path thread loops pc_next_request while its migration thread calls pc_send (answers
     * first, then the push) and, once every page has gone, pc_end. With VMM_RAM_PC_ANSWERS the
     * return-path thread sends the answers itself, between its pc_next_request calls. */
    int (*pc_begin)(void *conn, struct vmm_err *err);
    /* Returns 1 with *out filled, 0 when nothing came within wait_ms, -1 on failure. */
    int (*pc_next_request)(void *conn, uint32_t wait_ms, struct vmm_pc_request *out, struct vmm_err *err);
    int (*pc_send)(void *conn, const struct vmm_pc_pages *pages, struct vmm_err *err);
    int (*pc_end)(void *conn, struct vmm_err *err);
    int (*pc_request)(void *conn, uint32_t block, uint64_t offset, struct vmm_err *err);
    int (*pc_next_arrival)(void *conn, struct vmm_pc_pages *out, struct vmm_err *err);
    int (*pc_release)(void *conn, const struct vmm_pc_pages *pages, struct vmm_err *err);
    int (*pc_done)(void *conn, struct vmm_err *err);
    /* Optional, appended to ABI 1: breaks the link at once, as a failed network would
     * (migrate_pause, and a source whose postcopy failed): every call on the connection, at
     * both ends, fails from then on. Safe while another thread is inside a pc_* call. */
    int (*cut)(void *conn, struct vmm_err *err);
    /* Optional, appended to ABI 1: what the transport can do whatever its peer (VMM_TRANSPORT_*). */
    uint32_t features;
    /* Optional (VMM_RAM_SUMS_KEYED): the `size`-byte key this connection's sums are keyed with,
     * derived from its authentication, the same at both ends and known to nobody else. */
    int (*ram_sums_key)(void *conn, uint8_t *key, uint32_t size, struct vmm_err *err);
    /* Optional, appended to ABI 1: where this connection's setup time went in the transport, its
     * own steps so far in order (source: connect, then ram_setup; destination: accept, then
     * answering the source's setup requests while vmm reads the stream). Writes up to `max`
     * into `out` and returns how many steps there are. Names are the plugin's static strings. */
    uint32_t (*setup_parts)(void *conn, struct vmm_time_part *out, uint32_t max);
    /* Optional, appended to ABI 1: prepares, once per process, what every connection will need
     * (rdma: loading its libraries' device lists and drivers), so that the first migration does
     * not wait for it. vmm calls it once, on a thread of its own, soon after it starts, possibly
     * while another thread connects or listens; it cannot fail (a later call says what is wrong). */
    void (*warm_up)(void);
    /* Optional, appended to ABI 1: the settings this transport reads, as rows of vmm's settings
     * table, ended by a row whose name is NULL. When present, vmm takes the names from here and
     * not from `capabilities` and `parameters` (which a plugin still fills, for an older vmm). */
    const struct vmm_setting *settings;
    /* Optional, appended to ABI 1: whether this connection's last failure was its link's (the
     * peer gone or cut off, a device removed, retries exhausted, silence past x-io-timeout, a
     * cut) rather than a refusal or an ERROR either side sent: 1 or 0. vmm then waits for a new
     * connection instead of failing, when the precopy resumes (VMM_RAM_RESUMABLE). The plugin
     * does not tell the peer of such a failure (no ERROR: the migration may go on). Must not block. */
    int (*link_broke)(void *conn);
    /* Optional, appended to ABI 1: accept, as accept does, waiting at most wait_ms for a source;
     * on the timeout NULL with err's text empty (NULL with a text: the listener failed). The
     * listener may accept again once a connection it gave has been closed (a precopy's
     * resumption comes to the listener the migration began on). */
    void *(*accept_within)(void *listener, uint32_t wait_ms, struct vmm_err *err);
    /* Optional, appended to ABI 1: source: vmm registers `fn` (NULL to unregister), which the
     * plugin calls, from inside any call on this connection, with each run of RAM handed to
     * ram_send once the transport's own delivery says every byte of it is in the destination's
     * memory (rdma: its RDMA WRITEs completed on a reliable connection). After a broken link vmm
     * then sends again only what neither these reports nor the destination vouch for, instead of
     * the whole round the link broke in. Runs are page-aligned; a run may be part of a ram_send's
     * range, and ram_send_zero's ranges are never reported (only the destination vouches for them). */
    void (*ram_on_landed)(void *conn, void (*fn)(void *ctx, uint32_t block, uint64_t offset, uint64_t length),
                          void *ctx);

    /* Optional, appended to ABI 1, present together: pulling (the scheme "<scheme>-pull"). One
     * process serves `length` bytes at `base` (a saved guest's file, mapped read-only) for remote
     * read to every client that connects to args' host and port, on threads of its own, until
     * serve_stop; the bytes must not change meanwhile. A client opens a pull (pull_open: the
     * served length in *length) and reads any range of it (pull_read, whole, from any thread),
     * without the serving process's CPU; the plugin tells the server how much it has read, so
     * that serve_clients can say it. pull_close ends the pull (the server hears the client is
     * done). */
    void *(*serve)(const struct vmm_transport_args *args, const void *base, uint64_t length, struct vmm_err *err);
    /* Up to `max` clients, in the order they came, into `out`; returns how many there are. */
    uint32_t (*serve_clients)(void *server, struct vmm_pull_client *out, uint32_t max);
    void (*serve_stop)(void *server);
    void *(*pull_open)(const struct vmm_transport_args *args, uint64_t *length, struct vmm_err *err);
    int (*pull_read)(void *pull, void *into, uint64_t length, uint64_t at, struct vmm_err *err);
    void (*pull_close)(void *pull);

    /* Optional, appended to ABI 1, destination, with VMM_RAM_POSTCOPY: pc_request, from the
     * fault thread, for a transport that can fetch the page itself (rdma: an RDMA READ from
     * where the source told it may read). It may then wait for the page on the calling thread,
     * briefly (a wake-up of the receiving thread can cost more than the fetch takes), and return
     * 1 with *out filled (VMM_PC_DATA, no sums): vmm places those pages at once and hands them
     * back with pc_release, as it does pc_next_arrival's (the token tells the plugin which).
     * 0: asked for, or left to the receiving thread: the page comes through pc_next_arrival.
     * -1: failed; the receiving thread's pc_next_arrival fails with the same reason. */
    int (*pc_fetch)(void *conn, uint32_t block, uint64_t offset, struct vmm_pc_pages *out, struct vmm_err *err);
};

/* features bits. */
#define VMM_TRANSPORT_TLS 1u /* reads tls_* in vmm_transport_args: authenticates its peer with them */

/* ram_features bits. */
#define VMM_RAM_SUMS 1u /* verify-ram sums travel with the RAM channel (ram_sums, ram_on_sums) */
#define VMM_RAM_POSTCOPY 2u /* the connection carries postcopy (pc_*), agreed with its peer */
/* With VMM_RAM_POSTCOPY, source: pc_send takes answers (a token other than VMM_PC_PUSH) from the
 * return-path thread while the migration thread's pc_send pushes, at most one of each at once;
 * pc_end is never called while an answer is in progress. Without it, every pc_send is the
 * migration thread's. */
#define VMM_RAM_PC_ANSWERS 4u
/* The connection is authenticated (tls-creds): every page must go with sums (vmm turns
 * verify-ram's sums on), and the sums are MACs instead of XXH3-64: UMAC-64 (RFC 4418) of the
 * page under the key ram_sums_key gives (its first 16 bytes the key, the next 8 the nonce). */
#define VMM_RAM_SUMS_KEYED 8u
/* With VMM_RAM_POSTCOPY: the transport authenticates every postcopy write itself (a tag under a
 * key from its TLS session, checked on a private copy before pc_next_arrival hands it over), so
 * the tag stands in for verify-ram's sums there, as keyed sums do in precopy: vmm sends no sums
 * with pc_send and expects none from pc_next_arrival. */
#define VMM_RAM_PC_TAGGED 16u
/* The RAM channel's precopy can resume over a new connection after its link breaks
 * (x-resume-window): a round ram_serve_round served to its end is whole in the destination's
 * memory, a round cut short leaves what it wrote unknown (vmm sends it again), and the plugin
 * has link_broke and accept_within. */
#define VMM_RAM_RESUMABLE 32u
/* With VMM_RAM_POSTCOPY, source: the destination fetches pages of the push itself (rdma: by RDMA
 * READ, from RAM the transport told it where to read). pc_send of a push (VMM_PC_PUSH) may then
 * return 1 instead of 0: nothing was sent, the destination takes those pages itself and has
 * them before its END. vmm counts them held, not pushed. Answers are always sent. */
#define VMM_RAM_PC_PULLS 64u

/* The table of ABI 1 before any optional member: the least struct_size vmm accepts. */
#define VMM_TRANSPORT_OPS_V1_MIN_SIZE (offsetof(struct vmm_transport_ops, close) + sizeof(void (*)(void *)))

typedef const struct vmm_transport_ops *(*vmm_transport_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
