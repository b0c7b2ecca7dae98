// Where the daemon and ChromeDriver's namespace meet (relay.ts): the ports inside the namespace
// (private to it, so fixed numbers) and the two Unix sockets in the shared folder.

/** ChromeDriver's port inside the namespace. */
export const DRIVER_PORT = 9515;
/** The DevTools port inside the namespace: every session's goog:chromeOptions.debuggerAddress. */
export const DEVTOOLS_PORT = 9222;
export const DEBUGGER_ADDRESS = `127.0.0.1:${DEVTOOLS_PORT}`;
/** Served by the relay: ChromeDriver's WebDriver port. */
export const DRIVER_SOCKET = 'webdriver.sock';
/** Served by the daemon: the DevTools endpoint ChromeDriver attaches to. */
export const DEVTOOLS_SOCKET = 'devtools.sock';
