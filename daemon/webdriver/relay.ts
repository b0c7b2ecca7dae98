// The program ChromeDriver runs under, inside its own network namespace (driver.ts starts it as
// `unshare --user --map-root-user --net -- node relay.js <dir> <ip> <chromedriver>`, as the WebDriver
// user): no port of ChromeDriver's, and no DevTools port, exists on the machine's loopback, so no
// local user (the agent user included) can connect to either. The daemon reaches the namespace
// through two Unix sockets in <dir> (0700, the WebDriver user's):
//   <dir>/webdriver.sock  served here: each connection is carried to ChromeDriver's port in the namespace
//   <dir>/devtools.sock   served by the daemon (its CDP multiplexer): each connection to DEVTOOLS_PORT
//                         in the namespace (the debuggerAddress of every session) is carried there
// It brings the namespace's loopback up, starts ChromeDriver, and ends with it: ChromeDriver's exit
// is this process's exit (its code), and SIGTERM is handed on to ChromeDriver.
// Its own process (tsc's output, dist/daemon/webdriver/relay.js): only node's own modules.
import { spawn, execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { rmSync } from 'node:fs';
import { DEVTOOLS_PORT, DEVTOOLS_SOCKET, DRIVER_PORT, DRIVER_SOCKET } from './ports.js';

function pipeTo(from: net.Socket, connect: () => net.Socket): void {
  const to = connect();
  from.pipe(to).pipe(from);
  const end = (): void => {
    from.destroy();
    to.destroy();
  };
  from.on('error', end).on('close', end);
  to.on('error', end).on('close', end);
}

function main(): void {
  const [dir, ip, chromedriver] = process.argv.slice(2);
  if (dir === undefined || ip === undefined || chromedriver === undefined) {
    process.stderr.write('usage: relay.js <dir> <ip> <chromedriver>\n');
    process.exit(2);
  }
  execFileSync(ip, ['link', 'set', 'lo', 'up'], { stdio: 'inherit' });
  const driver = spawn(chromedriver, [`--port=${DRIVER_PORT}`, '--log-level=WARNING'], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, HOME: dir, TMPDIR: dir },
  });
  driver.on('error', (err) => {
    process.stderr.write(`relay: cannot start ${chromedriver}: ${err.message}\n`);
    process.exit(127);
  });
  driver.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128 + (signal === 'SIGTERM' ? 15 : 9))));
  process.on('SIGTERM', () => driver.kill('SIGTERM'));

  const driverSock = path.join(dir, DRIVER_SOCKET);
  rmSync(driverSock, { force: true });
  // TCP without Nagle's delay (noDelay): each WebDriver and CDP message is a small write answered at once.
  net.createServer((s) => pipeTo(s, () => net.connect({ port: DRIVER_PORT, host: '127.0.0.1', noDelay: true }))).listen(driverSock);
  const devtoolsSock = path.join(dir, DEVTOOLS_SOCKET);
  net.createServer({ noDelay: true }, (s) => pipeTo(s, () => net.connect(devtoolsSock))).listen(DEVTOOLS_PORT, '127.0.0.1');
}

main();
