// sock-diag.node: the owner (uid) of one TCP socket, asked of the kernel by its exact address, over
// the sock_diag netlink interface (NETLINK_SOCK_DIAG, one inet_diag_req_v2 without NLM_F_DUMP).
// The kernel answers from its connection hash by the 4-tuple: O(1), whatever the number of sockets
// on the machine, unlike a read of /proc/net/tcp (which walks the whole established hash, every
// bucket, ~4 ms here however few sockets there are). The uid is the same one /proc/net/tcp prints
// (the effective uid of the process that created the socket). No privilege is needed.
//
// JS: uidOf(localAddress, localPort, remoteAddress, remotePort) → the uid of the socket whose own
// (local) end is localAddress:localPort and whose other end is remoteAddress:remotePort, or -1
// when there is no such connected socket (an answer that is a listener, or for another tuple, is
// treated as none). Throws (with errno's text) when the interface itself fails, so that the caller
// can fall back to /proc. Blocking, bounded by a 1 s receive timeout: a request and one answer on
// a local netlink socket, microseconds.
#define NAPI_VERSION 8
#include <node_api.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define ADDR_MAX 64

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "sock_diag %s: %s", what, strerror(err));
  napi_throw_error(env, "ERR_SOCK_DIAG", msg);
  return NULL;
}

/** Parses an address into 16 bytes (IPv4 in the first 4); family AF_INET for IPv4 and IPv4-mapped IPv6. */
static int parse_addr(const char *text, int *family, __be32 out[4]) {
  struct in6_addr a6;
  struct in_addr a4;
  memset(out, 0, 16);
  if (inet_pton(AF_INET, text, &a4) == 1) {
    *family = AF_INET;
    out[0] = a4.s_addr;
    return 0;
  }
  if (inet_pton(AF_INET6, text, &a6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      *family = AF_INET;
      memcpy(&out[0], &a6.s6_addr[12], 4);
    } else {
      *family = AF_INET6;
      memcpy(out, a6.s6_addr, 16);
    }
    return 0;
  }
  return -1;
}

/** Whether an address of the answer (family `got`) is the one asked for (family `want`, parse_addr's form). */
static int same_addr(int got, const __be32 have[4], int want, const __be32 asked[4]) {
  if (got == want) return memcmp(have, asked, want == AF_INET ? 4 : 16) == 0;
  if (got == AF_INET6 && want == AF_INET) return have[0] == 0 && have[1] == 0 && have[2] == htonl(0xffff) && have[3] == asked[0];
  return 0;
}

static int get_string(napi_env env, napi_value v, char *buf, size_t size) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, buf, size, &len) != napi_ok || len == 0 || len >= size - 1) return -1;
  return 0;
}

static int get_port(napi_env env, napi_value v, int *port) {
  int32_t p;
  if (napi_get_value_int32(env, v, &p) != napi_ok || p < 1 || p > 65535) return -1;
  *port = p;
  return 0;
}

static napi_value uid_of(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  char laddr[ADDR_MAX], raddr[ADDR_MAX];
  int lport, rport, lfam, rfam;
  __be32 lbytes[4], rbytes[4];
  napi_value result;

  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 4 || get_string(env, argv[0], laddr, sizeof laddr) != 0 ||
      get_port(env, argv[1], &lport) != 0 || get_string(env, argv[2], raddr, sizeof raddr) != 0 || get_port(env, argv[3], &rport) != 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "uidOf(localAddress, localPort, remoteAddress, remotePort)");
    return NULL;
  }
  if (parse_addr(laddr, &lfam, lbytes) != 0 || parse_addr(raddr, &rfam, rbytes) != 0 || lfam != rfam) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "uidOf: not two IP addresses of one family");
    return NULL;
  }

  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } msg;
  memset(&msg, 0, sizeof msg);
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST; // one socket, not a dump
  msg.nlh.nlmsg_seq = 1;
  msg.req.sdiag_family = (__u8)lfam;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0U;
  msg.req.id.idiag_sport = htons((uint16_t)lport);
  msg.req.id.idiag_dport = htons((uint16_t)rport);
  memcpy(msg.req.id.idiag_src, lbytes, 16);
  memcpy(msg.req.id.idiag_dst, rbytes, 16);
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return throw_errno(env, "socket", errno);
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  ssize_t sent;
  do sent = sendto(fd, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, "send", err);
  }

  long answer = -1;
  int failure = 0;
  const char *failed_at = "recv";
  union {
    struct nlmsghdr h;
    char bytes[8192];
  } buf;
  for (int done = 0; !done;) {
    ssize_t n;
    do n = recv(fd, &buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      failure = errno;
      break;
    }
    int len = (int)n;
    for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != 1) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr *e = NLMSG_DATA(h);
        // ENOENT: no such socket. Anything else: the interface failed.
        if (e->error != 0 && e->error != -ENOENT) {
          failure = -e->error;
          failed_at = "request";
        }
        done = 1;
        break;
      }
      if (h->nlmsg_type == NLMSG_DONE) {
        done = 1;
        break;
      }
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
        struct inet_diag_msg *m = NLMSG_DATA(h);
        // Only the connection asked for: both ports, both addresses, and not a listener. An IPv6
        // socket connected to an IPv4 address answers with the IPv4-mapped form of both.
        int same = m->id.idiag_sport == msg.req.id.idiag_sport && m->id.idiag_dport == msg.req.id.idiag_dport &&
                   same_addr(m->idiag_family, m->id.idiag_src, lfam, lbytes) && same_addr(m->idiag_family, m->id.idiag_dst, lfam, rbytes);
        if (same && m->idiag_state != TCP_LISTEN) answer = (long)m->idiag_uid;
        done = 1; // an exact request has one answer
        break;
      }
    }
  }
  close(fd);
  if (failure != 0) return throw_errno(env, failed_at, failure);
  napi_create_int64(env, answer, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "uidOf", NAPI_AUTO_LENGTH, uid_of, NULL, &fn);
  napi_set_named_property(env, exports, "uidOf", fn);
  return exports;
}
