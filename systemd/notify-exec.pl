#!/usr/bin/perl
# notify-exec.pl PROGRAM [ARGS...]: run PROGRAM in this same process (exec, same pid) with a
# datagram socket already connected to $NOTIFY_SOCKET, its descriptor number in BROWSERD_NOTIFY_FD.
#
# Why: node cannot create AF_UNIX datagram sockets, but it can write(2) to one it inherits. Because
# exec keeps the pid, every notification node writes carries the unit's main PID, so the unit keeps
# NotifyAccess=main and the watchdog pings come from node's own event loop (see
# daemon/core/systemd.ts). perl-base is Essential on Debian; this uses only its core modules.
# Without NOTIFY_SOCKET (not under systemd) it simply execs PROGRAM.
use strict;
use warnings;
use Socket qw(AF_UNIX SOCK_DGRAM pack_sockaddr_un);
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC F_GETFL F_SETFL O_NONBLOCK);

@ARGV or die "usage: notify-exec.pl PROGRAM [ARGS...]\n";

# Declared here, not in the block below: the socket must stay open until exec.
my $sock;
my $path = $ENV{NOTIFY_SOCKET};
if (defined $path && $path ne '') {
    my $addr = $path;
    $addr =~ s/^@/\0/;    # a leading @ names a socket in the abstract namespace
    $addr =~ m{^[/\0]} or die "notify-exec: NOTIFY_SOCKET=$path is not a unix socket path\n";
    socket($sock, AF_UNIX, SOCK_DGRAM, 0) or die "notify-exec: socket: $!\n";
    connect($sock, pack_sockaddr_un($addr)) or die "notify-exec: cannot connect to NOTIFY_SOCKET=$path: $!\n";
    # Non-blocking: a hung manager must not block node's event loop on a full queue.
    my $fl = fcntl($sock, F_GETFL, 0) or die "notify-exec: fcntl: $!\n";
    fcntl($sock, F_SETFL, $fl | O_NONBLOCK) or die "notify-exec: fcntl: $!\n";
    # Survives exec (perl sets close-on-exec on every descriptor above 2).
    my $fd = fcntl($sock, F_GETFD, 0) or die "notify-exec: fcntl: $!\n";
    fcntl($sock, F_SETFD, $fd & ~FD_CLOEXEC) or die "notify-exec: fcntl: $!\n";
    $ENV{BROWSERD_NOTIFY_FD} = fileno($sock);
}
exec { $ARGV[0] } @ARGV or die "notify-exec: cannot run $ARGV[0]: $!\n";
